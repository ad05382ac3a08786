"""The server's own web app (``langgraph.json``: ``http.app``): a start-up hook, no routes.

Its lifespan runs once the server starts and before it answers a request: it loads
the embedding model and opens the knowledge base's index and keyword cache
(``awarm``, off the event loop), so the first turn costs what a later one does,
while importing the graphs stays fast.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from shared_kb import knowledge_base
from starlette.applications import Starlette


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Warm the knowledge base before the server answers its first request."""
    await knowledge_base.awarm()
    yield


app = Starlette(lifespan=lifespan)
