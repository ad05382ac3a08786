"""Procedures: named step-by-step instructions, matched to the current message.

A :class:`ProcedureLibrary` injects the procedure most similar to the user's
message (cosine with its name and description, or an example request), if it
reaches ``threshold``, as a ``[Procedure]`` block with numbered steps. The
default threshold is calibrated for the default model (docs/memory.md).
Restricted mode: procedures are the application's own text, injected as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_knowledge_inject._memory import require
from langchain_knowledge_inject._turn.blocks import DEFAULT_PRIORITIES

if TYPE_CHECKING:
    import numpy as np
    from langchain_core.embeddings import Embeddings
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig


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
    """

    name: str
    description: str
    steps: Sequence[str]
    examples: Sequence[str] = field(default=())

    def __post_init__(self) -> None:
        steps = tuple(" ".join(str(s).split()) for s in self.steps)
        require([
            ("name", self.name, bool(self.name.strip()), "a non-empty string"),
            ("steps", self.steps, bool(steps) and all(steps), "at least one step, none empty"),
        ])  # fmt: skip
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
        >>> format_procedure(Procedure("Reset", "", ["Open the login page"])).splitlines()[::2]
        ['[Procedure]', '1. Open the login page']
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
        require([
            ("procedures", names, len(set(names)) == len(names), "procedures with unique names"),
            ("threshold", threshold, -1.0 <= threshold <= 1.0, "a cosine similarity in [-1, 1]"),
            ("max_tokens", max_tokens, max_tokens is None or max_tokens >= 1, "at least 1 or None"),
        ])  # fmt: skip
        self.procedures, self.threshold, self._embeddings = procedures, threshold, embeddings
        self.priority, self.max_tokens = priority, max_tokens
        self._texts = [
            (i, text)
            for i, p in enumerate(procedures)
            for text in (f"{p.name}: {p.description}".strip(" :"), *p.examples)
        ]
        """What is matched: each procedure's name and description, and its examples."""
        self._matrix: np.ndarray | None = None

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model (the default one is loaded on first use)."""
        if self._embeddings is None:
            from langchain_knowledge_inject._store.embeddings import default_embeddings

            self._embeddings = default_embeddings()
        return self._embeddings

    # scores / ascores are the only I/O (the embedding calls); the rest is shared.
    def scores(self, query: str) -> list[ProcedureMatch]:
        """Every procedure with its similarity to ``query``, best first."""
        if not query.strip() or not self.procedures:
            return []
        if self._matrix is None:
            self._matrix = _unit_rows(self.embeddings.embed_documents([t for _, t in self._texts]))
        return self._rank(self.embeddings.embed_query(query))

    async def ascores(self, query: str) -> list[ProcedureMatch]:
        """Async twin of :meth:`scores` (the embedding model's async calls)."""
        if not query.strip() or not self.procedures:
            return []
        if self._matrix is None:
            texts = [t for _, t in self._texts]
            self._matrix = _unit_rows(await self.embeddings.aembed_documents(texts))
        return self._rank(await self.embeddings.aembed_query(query))

    def match(self, query: str) -> ProcedureMatch | None:
        """The best procedure for ``query`` if it reaches the threshold, else ``None``."""
        return self._best(self.scores(query))

    async def amatch(self, query: str) -> ProcedureMatch | None:
        """Async twin of :meth:`match`."""
        return self._best(await self.ascores(query))

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

    def _best(self, ranked: list[ProcedureMatch]) -> ProcedureMatch | None:
        return ranked[0] if ranked and ranked[0].score >= self.threshold else None

    def _rank(self, query: list[float]) -> list[ProcedureMatch]:
        assert self._matrix is not None
        similarities = self._matrix @ _unit_rows([query])[0]
        best: dict[int, float] = {}
        for (i, _), score in zip(self._texts, similarities.tolist(), strict=True):
            best[i] = max(best.get(i, -1.0), score)
        ranked = sorted(best.items(), key=lambda item: -item[1])
        return [ProcedureMatch(self.procedures[i], round(s, 6)) for i, s in ranked]


def _unit_rows(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """The vectors as rows of a matrix, each scaled to length 1."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=float)
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
