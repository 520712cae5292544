"""Knowledge chunks read again by their ref (``ChunkReader``), for a turn's read-back and for
the retrieved evidence a compaction commits constraints from (``relied``: the chunks a
session's turns carried, as their manifests record them).

One statement: the refs become (doc_id, version, chunk_no) rows and are joined with the
chunks under the same pushed-down permission as a search (``knowledge.VISIBLE``: tenant,
current version, ACL, domain, data level, expiry), so a ref never reads more than the turn
could have retrieved; a superseded version, a deleted or a hidden chunk is simply absent.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.adapters.postgres.db import Database, Sql
from app.adapters.postgres.knowledge import _HIT, VISIBLE, _hit, visible_params
from app.core.model import KnowledgeHit
from app.core.refs import parse_ref
from app.ports import KnowledgeQuery

READ_SQL = Sql(f"""
SELECT {_HIT}, NULL AS distance  -- read back by ref, not by the query: no cosine
FROM unnest(CAST(:docs AS text[]), CAST(:versions AS text[]), CAST(:nos AS integer[]))
     AS want(doc_id, version, chunk_no)
JOIN knowledge_chunks c ON c.tenant_id = :tenant_id AND c.doc_id = want.doc_id
     AND c.version = want.version AND c.chunk_no = want.chunk_no
WHERE {VISIBLE}
""")  # noqa: S608 - constant fragments, values are bound


# The kb:// refs of the segments of a session's last turns: only the refs leave the server,
# not the manifests' bodies (indexed by manifests_session).
RELIED_SQL = Sql("""
SELECT s.ref FROM (
    SELECT body, created_at FROM manifests
    WHERE tenant_id = :tenant_id AND session_id = :session_id
    ORDER BY created_at DESC LIMIT :turns
) AS m, jsonb_array_elements(m.body -> 'segments') AS seg, LATERAL (SELECT seg ->> 'ref') AS s(ref)
WHERE s.ref LIKE 'kb://%'
GROUP BY s.ref ORDER BY max(m.created_at) DESC, s.ref
""")


def chunk_key(ref: str) -> tuple[str, str, int] | None:
    """(doc_id, version, chunk_no) of a chunk ref, None for any other ref."""
    try:
        scheme, parts = parse_ref(ref)
    except ValueError:
        return None
    if scheme != "kb" or len(parts) != 3 or not parts[1].startswith("v") \
            or not parts[2].startswith("c") or not parts[2][1:].isdigit():
        return None
    return parts[0], parts[1][1:], int(parts[2][1:])


class PgChunkReader:
    """``tokenizer``/``detectors``: as ``PgKnowledgeStore``'s (stored counts and findings are
    used only when the same code made them)."""

    def __init__(self, db: Database, *, tokenizer: str, detectors: str) -> None:
        self._db = db
        self._tokenizer = tokenizer
        self._detectors = detectors

    async def relied(self, *, tenant_id: str, session_id: str, turns: int) -> list[str]:
        """The knowledge chunks the envelopes of the session's last ``turns`` turns carried,
        newest first, once each."""
        async with self._db.read_tx(tenant_id) as conn:
            rows = await conn.fetch(RELIED_SQL, {"tenant_id": tenant_id,
                                                 "session_id": session_id, "turns": turns})
        return [str(r.ref) for r in rows]

    async def chunks(self, *, query: KnowledgeQuery, refs: Sequence[str]
                     ) -> list[KnowledgeHit]:
        keys = [k for r in dict.fromkeys(refs) if (k := chunk_key(r)) is not None]
        if not keys:
            return []
        params = {**visible_params(query), "docs": [k[0] for k in keys],
                  "versions": [k[1] for k in keys], "nos": [k[2] for k in keys]}
        async with self._db.read_tx(query.tenant_id) as conn:
            rows = await conn.fetch(READ_SQL, params)
        return [_hit(r, i, "read_back", tokenizer=self._tokenizer, detectors=self._detectors)
                for i, r in enumerate(rows, start=1)]
