"""Every ```python block of README.md and docs/*.md runs alone, as a reader would copy it.

Each block is written to a file and run by itself in a fresh interpreter, in an empty
temporary working directory, with ``KINJECT_HOME`` in a fresh temporary directory, the
real bundled embedding model offline, and no credentials: so a block runs only with
the imports and the setup it shows. A block that connects to a Chroma server at
``127.0.0.1``, ``port=8000`` gets a real ``chroma run`` server of its own, empty, on a
free port (the port swapped in the code). A block preceded by ``<!-- not-run: <reason> -->``
is reported as skipped by ``tests/unit_tests/test_readme_examples.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.integration_tests.conftest import ChromaServer, _free_port
from tests.unit_tests.test_readme_examples import DOC_FILES, label, python_blocks

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HANG_GUARD = 600.0  # seconds: only against a hang (a loaded machine is slow), never a measure
CHROMA_SERVER = "chromadb.HttpClient("

BLOCKS = [
    (f"{label(path)}:{line}", code)
    for path in DOC_FILES
    for line, code, reason in python_blocks(path)
    if reason is None
]


def _environment(home: str) -> dict[str, str]:
    """This process's environment, offline and without credentials or kinject settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("KINJECT_", "LANGSMITH_", "LANGCHAIN_"))
        and not key.endswith(("_API_KEY", "_TOKEN"))
    }
    env.update(HF_HUB_OFFLINE="1", KINJECT_HOME=home, ANONYMIZED_TELEMETRY="False")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def test_the_docs_have_blocks_to_run():
    assert any(where.startswith("README.md:") for where, _ in BLOCKS)
    assert len(BLOCKS) >= 20


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_each_block_runs_alone(where, code, tmp_path):
    server = None
    if CHROMA_SERVER in code:
        assert "port=8000" in code, f"{where}: a Chroma server block names port=8000"
        server = ChromaServer(path=tmp_path / "chroma", port=_free_port())
        server.start()
        code = code.replace("port=8000", f"port={server.port}")
    script = tmp_path / "block.py"
    script.write_text(code, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    try:
        result = subprocess.run(
            [sys.executable, str(script)],
            cwd=work,
            env=_environment(str(tmp_path / "home")),
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
            check=False,
        )
    finally:
        if server is not None:
            server.stop()
    assert result.returncode == 0, f"{where} fails when run alone:\n{result.stderr[-4000:]}"
