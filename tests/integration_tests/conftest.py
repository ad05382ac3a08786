"""Fixtures of the integration tests: the real embedding model and a real Chroma server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def real_embeddings():
    from langchain_knowledge_inject._store.embeddings import default_embeddings

    return default_embeddings()


@pytest.fixture(scope="module")
def sample_kb(tmp_path_factory, real_embeddings):
    """The sample HR knowledge base with the real embedding model, one per test module."""
    from langchain_knowledge_inject import build_sample_knowledge_base

    kb = build_sample_knowledge_base(
        path=tmp_path_factory.mktemp("sample"), embeddings=real_embeddings
    )
    yield kb
    kb.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process(process: subprocess.Popen | None, timeout: float = 15.0) -> None:
    """Terminate a server process this test session started; kill it if it lingers."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)


@dataclass
class ChromaServer:
    """A `chroma run` process on loopback that tests can stop and start again."""

    path: Path
    port: int
    process: subprocess.Popen | None = None
    log: Path | None = None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def start(self, timeout: float = 60.0) -> None:
        chroma = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
        self.log = self.path.parent / f"chroma-{self.port}.log"
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    chroma,
                    "run",
                    "--path",
                    str(self.path),
                    "--host",
                    self.host,
                    "--port",
                    str(self.port),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chroma run exited early: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    pass
                self.client().heartbeat()
                return
            except Exception:  # not up yet
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"chroma run did not answer within {timeout}s")

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def client(self):
        import chromadb

        return chromadb.HttpClient(host=self.host, port=self.port)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory) -> Iterator[ChromaServer]:
    """A real Chroma server on a free loopback port, for the whole session."""
    server = ChromaServer(path=tmp_path_factory.mktemp("chroma-server") / "data", port=_free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()
