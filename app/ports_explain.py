"""Ports of explain (``app.service.explain``) and of the turn's permission counts.

Kept apart from ``app.ports``: read-side questions an ops engineer asks about one turn, each
bounded to the turn's tenant, answered with labels, ranks and refs, never content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from app.core.model import KnowledgeHit, Visibility
from app.ports import KnowledgeQuery


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedTurn:
    """A turn as stored: its manifest, the key that made it, and what it recorded to be
    explained (``app.core.explain.record_scope``; None: made before it was recorded, or
    cleared by an erasure)."""

    turn_id: str
    key_id: str
    body: dict[str, Any]
    recorded: dict[str, Any] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceKey:
    """One knowledge source: a document (its current version) or one chunk of a version."""

    doc_id: str
    version: str | None = None
    chunk_no: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceLabels:
    """A knowledge source's stored chunks with their labels (``text`` empty), and whether
    they are of the document's current version (a search reads no other)."""

    chunks: list[KnowledgeHit]
    current: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnSelection:
    """Which recorded turns a replay runs: named ones, or a session's, or a ``turn_id`` range
    (inclusive, in ``turn_id`` order), or the newest; at most ``limit``, oldest first."""

    turn_ids: tuple[str, ...] = ()
    session_id: str | None = None
    turn_id_from: str | None = None
    turn_id_to: str | None = None
    limit: int = 50


class TurnRecords(Protocol):
    async def turn(self, *, tenant_id: str, turn_id: str) -> RecordedTurn | None: ...


class TurnSelector(Protocol):
    """The recorded turns a replay runs (``app.service.replay``)."""

    async def select(self, *, tenant_id: str, selection: TurnSelection
                     ) -> list[RecordedTurn]:
        """The tenant's turns ``selection`` names, oldest first (by manifest time)."""
        ...


class KnowledgeProbe(Protocol):
    """Knowledge as permission sees it: labels without content, and ranks."""

    async def labels(self, *, tenant_id: str, source: SourceKey) -> SourceLabels | None:
        """``source``'s chunks in ``tenant_id``; None when the tenant has no such source."""
        ...

    async def ranks(self, *, query: KnowledgeQuery, source: SourceKey) -> dict[str, int]:
        """``source``'s best rank per ranker (``vector``, ``fts``) among the chunks
        ``query`` may read, as if searched now; a ranker that does not find it is absent."""
        ...

    async def withheld(self, *, query: KnowledgeQuery) -> list[KnowledgeHit]:
        """Labels of the chunks among the tenant's ``query.k`` best per ranker that
        ``query``'s permission filter keeps out (``text`` is empty)."""
        ...


class SessionReach(Protocol):
    async def visible(self, *, tenant_id: str, user_id: str, session_id: str | None,
                      agent_id: str | None, visibility: Visibility, target: str) -> bool:
        """Whether a turn of ``user_id`` on ``session_id`` (its request naming ``agent_id``)
        may read session ``target`` at ``visibility``: the transcript search's own
        definition (``sessions.VISIBLE_SQL``), asked for one session."""
        ...
