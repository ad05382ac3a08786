#!/usr/bin/env bash
# Create .venv and install the package with its test dependencies, from nothing.
# The CPU build of torch is pinned and installed first: an unpinned torch resolved
# by another package would pull several GB of CUDA packages. Each step says what it
# does and how long it took (pip itself stays quiet).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
started=$SECONDS
step() { echo "setup: $* ($((SECONDS - started)) s so far)"; }
if [ ! -x .venv/bin/python ]; then
    step "creating .venv with $PYTHON"
    "$PYTHON" -m venv .venv
fi
step "upgrading pip"
.venv/bin/python -m pip install --quiet --upgrade "pip>=25.1"
step "installing torch 2.13.0 (CPU build, about 200 MB; the longest step)"
.venv/bin/python -m pip install --quiet "torch==2.13.0"
step "installing the package with its test, integration, lint and typing groups"
.venv/bin/python -m pip install --quiet --group test --group test_integration --group lint --group typing -e .
echo "setup done in $((SECONDS - started)) s: $(.venv/bin/python -c 'import langchain_knowledge_inject as k; print("langchain-knowledge-inject", k.__version__)')"
