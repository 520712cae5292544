"""ctxgate as a Hermes memory provider: copy this directory to ``$HERMES_HOME/plugins/ctxgate``
and set ``memory.provider: ctxgate`` (docs/integrations.md, Hermes).

Hermes loads this file by path (``plugins/memory/__init__.py``) and calls ``register``; the
work is in ``app.integrations.hermes_provider``, installed into the Python Hermes runs on.
Here it only gains Hermes's ``MemoryProvider`` base class.
"""

from __future__ import annotations

from typing import Any

from agent.memory_provider import MemoryProvider

from app.integrations.hermes_provider import CtxgateMemory


# MemoryProvider is Any where ctxgate is type-checked: Hermes is not installed there
class CtxgateMemoryProvider(CtxgateMemory, MemoryProvider):  # type: ignore[misc]
    """ctxgate's context before each turn, the turn's events after it."""


def register(ctx: Any) -> None:
    ctx.register_memory_provider(CtxgateMemoryProvider())
