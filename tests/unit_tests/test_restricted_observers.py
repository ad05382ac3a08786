"""Observers inside the boundary (issue 31, leak class 5).

Every piece of work on raw text of a restricted turn runs in one context
(``flags.raw_access`` / ``flags.inside``): no caller callbacks, no tracer, its
warnings and log records dropped (raised in that context only, in any thread),
and its errors reduced to their class. Checked here on every surface and every
channel, with a source whose exception, warning and log record quote its chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import warnings
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.tracers.context import collect_runs
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_knowledge_inject import KnowledgeInjector
from langchain_knowledge_inject._store.flags import inside, unheard
from langchain_knowledge_inject.errors import ConfigurationError, RetrievalError
from tests.unit_tests.fakes import WordHashEmbedding
from tests.unit_tests.restricted_fixtures import make_summarizer
from tests.unit_tests.restricted_harness import CHANNELS, SURFACES, ListKB, run_surface

SECRET = "Quillonbray"
CHUNK = f"The settlement with {SECRET} is kept in escrow until both parties sign."
QUESTION = "Where are the settlement funds held?"
HANG_GUARD = 30


class NoisyKB(ListKB):
    """A knowledge base whose search warns, logs and (``fail``) raises with its chunk's text."""

    fail = False

    def search(self, query: str, **kwargs: Any) -> list[Document]:
        docs = super().search(query, **kwargs)
        warnings.warn(f"odd chunk: {CHUNK}", UserWarning, stacklevel=1)
        logging.getLogger("thirdparty.store").warning("read %s", CHUNK)
        if self.fail:
            msg = f"cannot parse {CHUNK}"
            raise ValueError(msg)
        return docs


class Recorder(BaseCallbackHandler):
    """Every callback a caller could see, as text."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_retriever_error(self, error: BaseException, **kwargs: Any) -> None:
        self.seen.append(f"{error!r} {error.__cause__!r} {error.__context__!r}")

    def on_retriever_end(self, documents: Any, **kwargs: Any) -> None:
        self.seen.append(str(documents))

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.seen.append(str(messages))


def _chain_text(error: BaseException | None) -> str:
    parts = []
    while error is not None and len(parts) < 10:
        parts.append(repr(error))
        error = error.__cause__ or error.__context__
    return "\n".join(parts)


@pytest.mark.parametrize("fail", [False, True])
@pytest.mark.parametrize("surface", SURFACES)
def test_no_channel_sees_a_sources_warning_log_or_error(surface, fail, caplog, capfd):
    """Every surface, every channel, the callbacks, the logs and stderr: 0 raw text."""
    caplog.set_level(logging.DEBUG)
    kb = NoisyKB([CHUNK])
    kb.fail = fail
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        turn = run_surface(surface, kb=kb, question=QUESTION,
                           summarizer=make_summarizer("honest"))  # fmt: skip
    assert bool(turn.reasons) is not fail  # a restricted turn, with a summary unless it failed
    for channel in CHANNELS:
        if channel in turn.channels:
            assert SECRET not in turn.text(channel), channel
    assert SECRET not in caplog.text
    assert not [w for w in caught if SECRET in str(w.message)]
    out, err = capfd.readouterr()
    assert SECRET not in out + err


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_failing_sources_error_reaches_callbacks_and_tracers_as_its_class(run):
    kb = NoisyKB([CHUNK])
    kb.fail = True
    injector = KnowledgeInjector(kb, restricted=True, summarizer_model=make_summarizer("honest"))
    recorder = Recorder()
    config = {"callbacks": [recorder]}
    with collect_runs() as collector:
        if run == "sync":
            injector.invoke(QUESTION, config)
        else:
            asyncio.run(injector.ainvoke(QUESTION, config))
    errors = [r.error for r in collector.traced_runs for r in [r, *r.child_runs] if r.error]
    assert any("ValueError" in e for e in errors)  # the tracer still sees what failed
    assert recorder.seen and any("ValueError" in s for s in recorder.seen)
    assert SECRET not in "\n".join(recorder.seen + errors)


def test_raising_on_error_carries_the_class_only():
    kb = NoisyKB([CHUNK])
    kb.fail = True
    injector = KnowledgeInjector(
        kb, restricted=True, summarizer_model=make_summarizer("honest"), on_error="raise"
    )
    with pytest.raises(RetrievalError) as info:
        injector.invoke(QUESTION)
    assert "ValueError" in str(info.value) and SECRET not in _chain_text(info.value)


class _OddScores(InMemoryVectorStore):
    def _select_relevance_score_fn(self) -> Any:
        return lambda distance: distance * 7  # outside [0, 1]: langchain-core warns


def test_langchain_cores_relevance_warning_prints_nothing(capfd, recwarn):
    """ "Relevance scores must be between 0 and 1, got [...]" quotes the documents."""
    store = _OddScores(WordHashEmbedding())
    store.add_documents([Document(CHUNK)])
    injector = KnowledgeInjector(store, restricted=True, summarizer_model=make_summarizer("honest"))
    warnings.simplefilter("always")
    injector.invoke(QUESTION)
    asyncio.run(injector.ainvoke(QUESTION))
    out, err = capfd.readouterr()
    assert SECRET not in out + err
    assert not [w for w in recwarn.list if SECRET in str(w.message)]


def test_inside_reduces_an_error_to_its_class():
    def boom() -> None:
        try:
            raise KeyError(CHUNK)
        except KeyError as exc:
            raise ValueError(CHUNK) from exc

    with pytest.raises(Exception) as info:
        inside(boom)
    assert type(info.value).__name__ == "ValueError"
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert SECRET not in str(info.value)

    def setting() -> None:
        msg = "tenant_id cannot be honoured"
        raise ConfigurationError(msg, option="tenant_id")

    with pytest.raises(ConfigurationError, match="tenant_id"):  # the caller's to fix: kept
        inside(setting)


@pytest.mark.slow
def test_warnings_and_logs_are_dropped_in_the_context_only_with_threads_at_once(caplog):
    """Threads inside and outside the context warn and log at the same moment."""
    caplog.set_level(logging.INFO)
    log = logging.getLogger("thirdparty.concurrent")
    barrier = threading.Barrier(8)
    outcome: dict[int, bool] = {}

    def work(i: int) -> None:
        hidden = i % 2 == 0
        with warnings.catch_warnings(record=True) as caught:  # each thread's own record
            warnings.simplefilter("always")
            ctx = unheard() if hidden else contextlib.nullcontext()
            with ctx:
                barrier.wait(timeout=HANG_GUARD)
                for _ in range(50):
                    warnings.warn(f"w{i}", UserWarning, stacklevel=1)
                    log.info("l%d", i)
        outcome[i] = any(str(w.message) == f"w{i}" for w in caught)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_GUARD)
    logged = {r.getMessage() for r in caplog.records}
    for i in range(8):
        assert (f"l{i}" in logged) is (i % 2 == 1), i
    # catch_warnings is per process: the visible threads' warnings are recorded somewhere
    # among the overlapping records, the hidden threads' nowhere
    assert not any(outcome[i] for i in range(0, 8, 2))
