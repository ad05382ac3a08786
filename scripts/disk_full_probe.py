"""Fill a small filesystem under a knowledge base, then free space: what errors, does it recover?

Run as root in a private mount namespace with a small tmpfs (nothing outside is touched)::

    unshare -m sh -c 'mkdir -p /tmp/kinject-full && \
        mount -t tmpfs -o size=24m tmpfs /tmp/kinject-full && \
        python scripts/disk_full_probe.py /tmp/kinject-full'

It writes a ballast file, fills the rest with ``add_documents`` until a write
fails, prints the error (type and message), runs ``check()``, runs ``kinject
ingest`` on the full disk as a subprocess (stderr and exit code), deletes the
ballast and writes, searches and checks again in the same process.
``scripts/read_only_probe.py`` does the same for a read-only bind mount.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase


def _docs(start: int, n: int) -> list[Document]:
    return [
        Document(
            f"Paragraph {i}: " + " ".join(f"word{(i * 7 + j) % 5000}" for j in range(150)),
            metadata={"source": f"file{i // 20}.md"},
        )
        for i in range(start, start + n)
    ]


def main(root: Path) -> int:
    """Run the probe on the file system mounted at ``root``."""
    store = root / "store"
    ballast = root / "ballast"
    ballast.write_bytes(b"\0" * (12 << 20))
    kb = KnowledgeBase(
        "full", path=store, embeddings=DeterministicFakeEmbedding(size=384), restricted=True
    )
    written, error = 0, None
    t0 = time.monotonic()
    while error is None and written < 200_000:
        try:
            kb.add_documents(_docs(written, 200))
            written += 200
        except Exception as exc:
            error = exc
    print(f"documents written before the disk filled: {written} ({time.monotonic() - t0:.1f}s)")
    print(f"error on the full disk: {type(error).__module__}.{type(error).__name__}: {error}")
    t0 = time.monotonic()
    try:
        report = kb.check()
        print(f"check() on the full disk: {report.summary()!r} in {time.monotonic() - t0:.1f}s")
    except Exception as exc:
        print(
            f"check() on the full disk raised {type(exc).__name__}: {exc} "
            f"after {time.monotonic() - t0:.1f}s"
        )
    try:
        hits = kb.search("word7 word14", k=2, min_score=0.0)
        print(f"search on the full disk: {len(hits)} hits")
    except Exception as exc:
        print(f"search on the full disk raised {type(exc).__name__}: {exc}")
    kb.close()
    doc = root / "doc.txt"
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "langchain_knowledge_inject._surfaces.cli",
            "--path",
            str(store),
            "ingest",
            str(_write_doc(doc)),
            "--kb",
            "full",
        ],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=300,
        check=False,
    )
    print(
        f"kinject ingest on the full disk: exit {cli.returncode}, "
        f"stderr {len(cli.stderr.splitlines())} line(s): {cli.stderr.strip()[-400:]!r}"
    )
    kb = KnowledgeBase("full", path=store, embeddings=DeterministicFakeEmbedding(size=384))
    ballast.unlink()
    import shutil

    print(f"ballast freed: 12 MiB; free now {shutil.disk_usage(root).free >> 10} KiB")
    try:
        try:
            result = kb.add_documents(_docs(written, 20))
        except Exception as exc:
            print(f"first write after freeing: {type(exc).__name__}: {str(exc)[:120]}")
            result = kb.add_documents(_docs(written, 20))
        print(f"after freeing space, same process: add_documents added {result.added}")
        hits = kb.search("word7 word14", k=2, min_score=0.0, mode="keyword")
        print(f"keyword search: {len(hits)} hits; check: {kb.check().summary()!r}")
    except Exception as exc:
        print(f"after freeing space, same process: {type(exc).__name__}: {exc}")
    kb.close()
    return 0


def _write_doc(path: Path) -> Path:
    with contextlib.suppress(OSError):
        path.write_text("Staff get 25 days of annual leave. " * 200)
    return path


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
