"""The ``kinject`` console script: ingest, search, list knowledge bases, demo, chat.

``kinject --help`` shows an example of each command (``_EXAMPLES``).
``--path DIR`` (before or after the subcommand) selects the store directory;
the default is the per-user directory (``KINJECT_HOME`` overrides it).
``--host``/``--port`` (``KINJECT_CHROMA_HOST``/``_PORT``) use a Chroma server; ``-v``
shows the log. Errors are one line on stderr; exit codes: 0 success, 1 failure, 2
usage error (bad argument, missing knowledge base, missing path, empty folder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._version import __version__
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    IngestError,
    KnowledgeBaseNotFoundError,
    KnowledgeBaseOpenError,
    KnowledgeInjectError,
)

if TYPE_CHECKING:
    from langchain_core.documents import Document

    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

_SNIPPET_CHARS = 160


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kinject`` on ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    Example:
        >>> main(["kbs", "--path", str(tmp_path)])  # doctest: +SKIP
        No knowledge bases in ...
        0
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 2
    import logging

    shown = logging.StreamHandler()  # quiet: the package's warnings; -v: every library's log
    shown.addFilter(lambda r: args.verbose or r.name.startswith("langchain_knowledge_inject"))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[shown])
    try:
        code: int = args.handler(args)
    except KnowledgeBaseNotFoundError as exc:
        return _fail(f"{exc} (`kinject kbs` lists the knowledge bases)", code=2)
    except (IngestError, ConfigurationError) as exc:
        return _fail(str(exc), code=2)
    except KnowledgeInjectError as exc:
        return _fail(str(exc), code=1)
    except KeyboardInterrupt:
        return _fail("interrupted", code=130)
    return code


def _fail(message: str, *, code: int) -> int:
    print(f"kinject: error: {message}", file=sys.stderr)
    return code


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        msg = f"must be a positive integer, got {value}"
        raise argparse.ArgumentTypeError(msg)
    return number


_EXAMPLES = {
    "demo": ["kinject demo                              # the sample HR knowledge base, asked"],
    "ingest": [
        "kinject ingest docs/ handbook.pdf --kb hr --category policy",
        "kinject ingest notes/ --kb hr --tenant acme --chunk-size 2000",
    ],
    "search": [
        'kinject search "how many days of leave?" --kb hr --k 3',
        'kinject search "carry-over" --kb hr --mode keyword --json',
    ],
    "kbs": ["kinject kbs --host 127.0.0.1 --port 8000   # chunks, restricted or open"],
    "check": ["kinject check --kb hr --repair"],
    "chat": [
        "kinject chat --kb hr                       # no model: shows the messages sent",
        "kinject chat --kb hr --model openai:gpt-4o-mini  # needs langchain-openai",
    ],
}
"""Examples shown by ``kinject --help`` (all of them) and by each command's ``--help``."""


def _epilog(*commands: str) -> str:
    lines = [line for command in commands for line in _EXAMPLES[command]]
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="kinject",
        description="Knowledge bases for LangChain and LangGraph models: ingest, search, chat.",
        epilog=_epilog(*_EXAMPLES),
        formatter_class=raw,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    for options in (parser, common):  # also after the subcommand; absent there: the global value
        options.add_argument("--path", metavar="DIR", help="store directory")
        options.add_argument("--host", help="a Chroma server (default $KINJECT_CHROMA_HOST)")
        options.add_argument(
            "--port", type=int, help="its port (default $KINJECT_CHROMA_PORT, 8000)"
        )
        options.add_argument("-v", "--verbose", action="store_true", help="show the log")
    env = os.environ.get
    parser.set_defaults(path=None, verbose=False, host=env("KINJECT_CHROMA_HOST"))
    parser.set_defaults(port=env("KINJECT_CHROMA_PORT", "8000"))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, parents=[common], help=summary, description=summary.capitalize() + ".",
            epilog=_epilog(name), formatter_class=raw,
        )  # fmt: skip

    p = command("ingest", "add files and folders to a knowledge base")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    p.add_argument("--kb", required=True, metavar="NAME", help="knowledge base (created if new)")
    p.add_argument("--category", default=None, help="metadata category for every chunk")
    p.add_argument("--tenant", default=None, help="tenant partition to write to")
    p.add_argument("--no-recursive", action="store_true", help="do not walk sub-folders")
    size = "chunk size in characters (default: chunks that fit the embedding model)"
    p.add_argument("--chunk-size", metavar="N", type=_positive_int, help=size)
    overlap = "overlap in characters (default 150, at most half the chunk size)"
    p.add_argument("--chunk-overlap", metavar="N", type=int, help=overlap)
    large = "files over N MB are named before the work starts (default 10)"
    p.add_argument("--large-file-mb", metavar="N", type=float, default=10.0, help=large)
    p.add_argument("--skip-large", action="store_true", help="refuse those files")
    p.set_defaults(handler=_cmd_ingest)

    p = command("search", "search a knowledge base")
    p.add_argument("query")
    p.add_argument("--kb", required=True, metavar="NAME", help="knowledge base to search")
    p.add_argument("--k", type=_positive_int, default=4, help="number of results (default 4)")
    p.add_argument("--mode", choices=["dense", "keyword", "hybrid"], default="hybrid")
    p.add_argument("--tenant", default=None, help="tenant partition to search")
    p.add_argument("--min-score", type=float, default=None, help="drop results below this")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(handler=_cmd_search)

    command("kbs", "list the knowledge bases of a store").set_defaults(handler=_cmd_kbs)
    command("demo", "build the sample HR knowledge base and query it").set_defaults(
        handler=_cmd_demo
    )

    p = command("check", "report (and repair) drift in a knowledge base's indexes")
    p.add_argument("--kb", required=True, metavar="NAME", help="knowledge base to check")
    p.add_argument("--repair", action="store_true", help="fix the drift found")
    p.set_defaults(handler=_cmd_check)

    p = command("chat", "chat with a model grounded in a knowledge base")
    p.add_argument("--kb", required=True, metavar="NAME", help="knowledge base the answers draw on")
    model = "any init_chat_model string, its provider package installed (default: "
    model += "$KINJECT_CHAT_MODEL; none: print the messages that would be sent)"
    p.add_argument("--model", metavar="PROVIDER:MODEL", help=model)
    p.add_argument("--tenant", default=None, help="tenant partition to search")
    p.set_defaults(handler=_cmd_chat)
    return parser


def _cmd_ingest(args: argparse.Namespace) -> int:
    from langchain_knowledge_inject._ingest import loading
    from langchain_knowledge_inject._ingest.folders import collect_files
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

    # Missing paths, empty folders and bad chunk sizes fail before the knowledge base is created.
    recursive, sizes = not args.no_recursive, (args.chunk_size, args.chunk_overlap)
    collect_files(args.paths, recursive=recursive, report=loading.IngestReport())
    loading.ingest_splitter(None, *sizes)
    # By default ingest() cuts each file once, with the knowledge base's own splitter
    # (chunks that fit the embedding model's window), which then stores them as they
    # are. Chunk sizes the user chose are characters, stored as they are.
    splitter: dict[str, Any] = {"text_splitter": None} if sizes != (None, None) else {}
    with KnowledgeBase(args.kb, path=args.path, client=_client(args), **splitter) as kb:
        report = loading.ingest(
            kb, args.paths, category=args.category, tenant_id=args.tenant, recursive=recursive,
            chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap,
            large_file_mb=args.large_file_mb, skip_large=args.skip_large,
        )  # fmt: skip
        print(report.summary())
        print(f"Knowledge base {args.kb!r} now holds {kb.info.chunk_count} chunks.")
    return 0


def _client(args: argparse.Namespace) -> Any:
    """A client of the Chroma server ``--host``/``--port``, or None for the embedded store."""
    if not args.host:
        return None
    import chromadb

    try:
        return chromadb.HttpClient(host=args.host, port=int(args.port))
    except Exception as exc:  # a bad port, or the server down (chromadb asks it at once)
        msg = f"cannot reach the Chroma server at {args.host}:{args.port} ({exc})"
        raise KnowledgeBaseOpenError(msg) from exc


def _existing(args: argparse.Namespace) -> KnowledgeBase:
    """The knowledge base ``args.kb``, opened; a missing one is an error, and nothing is created."""
    from langchain_knowledge_inject._store.metadata import require_knowledge_base

    if not args.host:
        require_knowledge_base(args.kb, args.path)  # without chromadb where the store allows
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

    return KnowledgeBase(args.kb, path=args.path, client=_client(args), create=False)


def _cmd_search(args: argparse.Namespace) -> int:
    with _existing(args) as kb:
        docs = kb.search(
            args.query, k=args.k, min_score=args.min_score, mode=args.mode, tenant_id=args.tenant
        )
    if args.json:
        rows = [{"id": d.id, "content": d.page_content, "metadata": d.metadata} for d in docs]
        print(json.dumps(rows, indent=2, ensure_ascii=False, default=str))
        return 0
    if not docs:
        print("No results." + ("" if args.min_score == 0 else " Try a lower --min-score."))
    for rank, doc in enumerate(docs, 1):
        print(_format_hit(rank, doc))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    """Exit 0 when consistent (or repaired), 1 when drift was found and left."""
    from langchain_knowledge_inject._store import peek
    from langchain_knowledge_inject._store.storage import default_store_path

    store = Path(args.path).expanduser() if args.path is not None else default_store_path()
    # None: a server, no such knowledge base, a catch-up or repair due
    report = None if args.host else peek.check(store, args.kb)
    if report is None:
        with _existing(args) as kb:
            report = kb.check(repair=args.repair)
    print(report.summary())
    if args.repair:
        return 1 if report.unexplained else 0
    return 0 if report.clean else 1


def _cmd_kbs(args: argparse.Namespace) -> int:
    from langchain_knowledge_inject._store.metadata import list_knowledge_bases
    from langchain_knowledge_inject._store.storage import default_store_path

    infos = list_knowledge_bases(args.path, client=_client(args))
    if not infos:
        where = f"{args.host}:{args.port}" if args.host else args.path or default_store_path()
        print(f"No knowledge bases in {where}. Create one with `kinject ingest` or `kinject demo`.")
        return 0
    width = max(len("NAME"), *(len(info.name) for info in infos))
    print(f"{'NAME':<{width}}  {'CHUNKS':>7}  {'ACCESS':<10}  MODEL / DESCRIPTION")
    for info in infos:
        access = "restricted" if info.restricted else "open"
        print(f"{info.name:<{width}}  {info.chunk_count:>7}  {access:<10}  {info.embedding_model}")
        if info.description:
            print(f"{'':<{width}}  {'':>7}  {'':<10}  {_snippet(info.description)}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from langchain_knowledge_inject._ingest.sample_data import (
        SAMPLE_QUESTIONS,
        build_sample_knowledge_base,
    )

    print("Building the sample HR knowledge base (default embedding model, offline)...")
    with build_sample_knowledge_base(path=args.path, client=_client(args)) as kb:
        info = kb.info
        results = [kb.search(sample.question, k=3) for sample in SAMPLE_QUESTIONS]
    print(f"Knowledge base {info.name!r} in {kb.path}: {info.chunk_count} chunks, "
          f"model {info.embedding_model}")  # fmt: skip
    found = 0
    for sample, docs in zip(SAMPLE_QUESTIONS, results, strict=True):
        hit = bool(docs) and docs[0].metadata.get("source") == sample.expected_source
        found += hit
        print(f"\nQ: {sample.question}")
        print(f"   expected: {sample.expected_source} ({sample.answer!r})")
        if not docs:
            print("   (nothing scored above the default min_score)")
        for rank, doc in enumerate(docs, 1):
            print(_format_hit(rank, doc))
    total = len(SAMPLE_QUESTIONS)
    print(f"\nTop result from the expected policy for {found} of {total} questions.")
    where = f" --path {args.path}" if args.path else ""
    print(f'Try: kinject search "how many days can I carry over?" --kb {info.name}{where}')
    return 0


def _cmd_chat(args: argparse.Namespace) -> int:
    from langchain_knowledge_inject._surfaces.chat import MODEL_ENV_VAR, chat_model, run_chat

    name = args.model or os.environ.get(MODEL_ENV_VAR)
    model = chat_model(name) if name else None  # a bad model fails before the KB is opened
    with _existing(args) as kb:
        return run_chat(kb, model, model_name=name, tenant_id=args.tenant)


def _format_hit(rank: int, doc: Document) -> str:
    meta = doc.metadata
    where = str(meta.get("source", "?"))
    if meta.get("page") is not None:
        where += f" p.{meta['page']}"
    if meta.get("headers"):
        where += f" [{meta['headers']}]"
    score = meta.get("score")
    score_text = f"{score:.3f}" if isinstance(score, (int, float)) else "  -  "
    return f"  {rank}. {score_text}  {where}\n       {_snippet(doc.page_content)}"


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 3].rstrip() + "..."


if __name__ == "__main__":
    sys.exit(main())
