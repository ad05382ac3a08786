#!/usr/bin/env bash
# Create .venv and install the package with its test dependencies, from nothing.
# The CPU build of torch is pinned and installed first: an unpinned torch resolved
# by another package would pull several GB of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade "pip>=25.1"
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet --group test --group test_integration --group lint --group typing -e .
echo "setup done: $(.venv/bin/python -c 'import langchain_knowledge_inject as k; print("langchain-knowledge-inject", k.__version__)')"
