"""Procedures: named step-by-step instructions, matched to the current message.

A :class:`Procedure` is written by the application developer ("how to request
leave": a description and numbered steps). A :class:`ProcedureLibrary` embeds
every procedure once (its name and description, plus any example requests)
and, each turn, compares the current user message with them by cosine
similarity: the best procedure at or above ``threshold`` is injected, at most
one per turn, under a ``[Procedure]`` header with its numbered steps.

The default threshold, 0.45, was calibrated with the default embedding model
(all-MiniLM-L6-v2) on 8 procedures, 40 requests that should select one and 40
messages that should not (``tests/integration_tests/test_memory_integration.py``):
at 0.45 every request selects its procedure and no off-topic message selects
one, while 6 of 16 questions on a procedure's topic that do not ask for it
("How many days of annual leave do I get?") still do, which costs a few tokens
but misleads nothing. At 0.55, 20% of requests are missed. Another embedding
model needs its own calibration.

Restricted mode: procedures are the application's own text, not knowledge-base
content, so they are injected unchanged in restricted mode too.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_knowledge_inject._turn.blocks import DEFAULT_PRIORITIES
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig

__all__ = [
    "DEFAULT_PROCEDURE_THRESHOLD",
    "Procedure",
    "ProcedureLibrary",
    "ProcedureMatch",
    "format_procedure",
]

DEFAULT_PROCEDURE_THRESHOLD = 0.45
"""Cosine similarity a message needs to match a procedure (all-MiniLM-L6-v2)."""


@dataclass(frozen=True)
class Procedure:
    """A named step-by-step instruction.

    Attributes:
        name: Unique name, e.g. ``"Request leave"``.
        description: What the procedure is for; matched against the user's message.
        steps: The steps, in order (rendered numbered).
        examples: Optional example requests that should select this procedure
            (each is matched too; the best similarity counts).

    Example:
        >>> p = Procedure("Request leave", "How to ask for paid leave",
        ...               ["Open the HR portal", "Pick the dates", "Submit"])
        >>> p.steps[0]
        'Open the HR portal'
    """

    name: str
    description: str
    steps: Sequence[str]
    examples: Sequence[str] = field(default=())

    def __post_init__(self) -> None:
        steps = tuple(" ".join(str(s).split()) for s in self.steps)
        if not self.name.strip():
            msg = "a procedure needs a non-empty name"
            raise ConfigurationError(msg, option="name", value=self.name)
        if not steps or not all(steps):
            msg = f"procedure {self.name!r} needs at least one step, and no empty step"
            raise ConfigurationError(msg, option="steps", value=self.steps)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "examples", tuple(e for e in self.examples if e.strip()))


@dataclass(frozen=True)
class ProcedureMatch:
    """The procedure selected for a message.

    Attributes:
        procedure: The matched procedure.
        score: Its cosine similarity with the message.
    """

    procedure: Procedure
    score: float


def format_procedure(procedure: Procedure) -> str:
    """Render a procedure as the ``[Procedure]`` block.

    Example:
        >>> text = format_procedure(Procedure("Reset password", "Forgotten password",
        ...                                   ["Open the login page", "Click 'Forgot'"]))
        >>> lines = text.splitlines()
        >>> lines[0], lines[2:]
        ('[Procedure]', ['1. Open the login page', "2. Click 'Forgot'"])
        >>> lines[1].startswith('The user') and '"Reset password"' in lines[1]
        True
    """
    description = " ".join(procedure.description.split())
    about = f" ({description})" if description else ""
    lines = [
        "[Procedure]",
        f'The user\'s request matches the procedure "{procedure.name}"{about}. '
        "Follow these steps in order where they apply:",
    ]
    lines += [f"{i}. {step}" for i, step in enumerate(procedure.steps, start=1)]
    return "\n".join(lines)


class ProcedureLibrary:
    """Procedures matched to the current message (a ``ContextBlock``).

    Args:
        procedures: The procedures (names must be unique).
        embeddings: Embedding model; defaults to the package's offline default.
        threshold: Minimum cosine similarity for a match, in ``[-1, 1]``.
        priority: Budget priority of the block (see :mod:`~._turn.blocks`).
        max_tokens: Cap of the block, or ``None``.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> leave = Procedure("Request leave", "How to request leave", ["Open the portal"])
        >>> lib = ProcedureLibrary([leave], embeddings=DeterministicFakeEmbedding(size=16),
        ...                        threshold=0.99)
        >>> lib.match("Request leave: How to request leave").procedure.name
        'Request leave'
        >>> lib.render(query="What's the weather?", messages=[]) is None
        True
    """

    name = "procedure"

    def __init__(
        self,
        procedures: Sequence[Procedure],
        *,
        embeddings: Embeddings | None = None,
        threshold: float = DEFAULT_PROCEDURE_THRESHOLD,
        priority: int = DEFAULT_PRIORITIES["procedure"],
        max_tokens: int | None = None,
    ) -> None:
        procedures = tuple(procedures)
        names = [p.name for p in procedures]
        if len(set(names)) != len(names):
            msg = "procedure names must be unique"
            raise ConfigurationError(msg, option="procedures", value=names)
        if not -1.0 <= threshold <= 1.0:
            msg = f"threshold must be a cosine similarity in [-1, 1], got {threshold!r}"
            raise ConfigurationError(msg, option="threshold", value=threshold)
        if max_tokens is not None and max_tokens < 1:
            msg = f"max_tokens must be at least 1 or None, got {max_tokens!r}"
            raise ConfigurationError(msg, option="max_tokens", value=max_tokens)
        self.procedures = procedures
        self.threshold = threshold
        self.priority = priority
        self.max_tokens = max_tokens
        self._embeddings = embeddings
        self._vectors: list[tuple[int, list[float]]] | None = None
        self._lock = threading.Lock()

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model (the default one is loaded on first use)."""
        if self._embeddings is None:
            from langchain_knowledge_inject._store.embeddings import default_embeddings

            self._embeddings = default_embeddings()
        return self._embeddings

    def _texts(self) -> list[tuple[int, str]]:
        out = []
        for i, p in enumerate(self.procedures):
            out.append((i, f"{p.name}: {p.description}".strip(" :")))
            out += [(i, example) for example in p.examples]
        return out

    def _index(self) -> list[tuple[int, list[float]]]:
        with self._lock:
            if self._vectors is None:
                texts = self._texts()
                vectors = self.embeddings.embed_documents([t for _, t in texts]) if texts else []
                self._vectors = [(i, _unit(v)) for (i, _), v in zip(texts, vectors, strict=True)]
            return self._vectors

    async def _aindex(self) -> list[tuple[int, list[float]]]:
        if self._vectors is None:
            texts = self._texts()
            docs = [t for _, t in texts]
            vectors = await self.embeddings.aembed_documents(docs) if docs else []
            with self._lock:
                if self._vectors is None:
                    pairs = zip(texts, vectors, strict=True)
                    self._vectors = [(i, _unit(v)) for (i, _), v in pairs]
        return self._vectors

    def scores(self, query: str) -> list[ProcedureMatch]:
        """Every procedure with its similarity to ``query``, best first."""
        if not query.strip() or not self.procedures:
            return []
        return self._rank(self._index(), self.embeddings.embed_query(query))

    async def ascores(self, query: str) -> list[ProcedureMatch]:
        """Async twin of :meth:`scores`."""
        if not query.strip() or not self.procedures:
            return []
        index = await self._aindex()
        return self._rank(index, await self.embeddings.aembed_query(query))

    def match(self, query: str) -> ProcedureMatch | None:
        """The best procedure for ``query`` if it reaches the threshold, else ``None``."""
        ranked = self.scores(query)
        return ranked[0] if ranked and ranked[0].score >= self.threshold else None

    async def amatch(self, query: str) -> ProcedureMatch | None:
        """Async twin of :meth:`match`."""
        ranked = await self.ascores(query)
        return ranked[0] if ranked and ranked[0].score >= self.threshold else None

    def render(
        self,
        *,
        query: str,
        messages: Sequence[BaseMessage] = (),
        config: RunnableConfig | None = None,
    ) -> str | None:
        """The ``[Procedure]`` block for this turn, or ``None`` when none matches."""
        found = self.match(query)
        return format_procedure(found.procedure) if found else None

    async def arender(
        self,
        *,
        query: str,
        messages: Sequence[BaseMessage] = (),
        config: RunnableConfig | None = None,
    ) -> str | None:
        """Async twin of :meth:`render`."""
        found = await self.amatch(query)
        return format_procedure(found.procedure) if found else None

    def _rank(
        self, index: list[tuple[int, list[float]]], query: list[float]
    ) -> list[ProcedureMatch]:
        q = _unit(query)
        best: dict[int, float] = {}
        for i, vector in index:
            score = sum(a * b for a, b in zip(q, vector, strict=True))
            best[i] = max(best.get(i, -1.0), score)
        ranked = sorted(best.items(), key=lambda item: -item[1])
        return [ProcedureMatch(self.procedures[i], round(s, 6)) for i, s in ranked]


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]
