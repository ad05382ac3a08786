"""A real ``chroma run`` server on a free loopback port, for the fault benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def chroma_server(path: Path):
    """Start ``chroma run`` on 127.0.0.1; yield ``(process, port)``; stop it afterwards."""
    import chromadb

    port = free_port()
    chroma = str(Path(sys.executable).parent / "chroma")
    log = (path.parent / "chroma.log").open("ab")
    cmd = [chroma, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
                break
            except Exception:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("chroma run did not start") from None
                time.sleep(0.2)
        yield process, port
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.terminate()
            process.wait(timeout=30)
        log.close()


def client(port: int) -> Any:
    import chromadb

    return chromadb.HttpClient(host="127.0.0.1", port=port)
