"""What explain reads (``TurnRecords``, ``KnowledgeProbe``): labels and ranks, never content.

* ``turn``: the manifest row with its key and its ``recorded`` scope (migration 0022);
  ``select``: the rows a replay runs (``TurnSelection``).
* ``labels``: a document's current chunks, or one chunk of a version, with the labels the
  permission predicate reads; bounded to the tenant like every query (RLS too), so another
  tenant's document is as absent as a missing one.
* ``ranks``: where a source's chunks would rank now among what the query may read
  (``knowledge.VISIBLE``, the same filter the turn's search applied): ``1 +`` the readable
  chunks nearer the query vector (cosine distance, the embedding space's rows only), and
  ``1 +`` the readable full-text matches scoring above it (the search's own ``ts_rank``
  measure). Exact counts over the readable rows: an ops question, not the turn's path.
* ``visible``: whether a turn's transcript search may read one session, asked of the search's
  own ``sessions.VISIBLE_SQL`` (the only definition of session visibility).
* ``withheld``: the tenant's ``k`` best chunks per ranker with the permission filter left out
  (tenant and current version only), less those ``VISIBLE`` keeps: what permission withheld
  from the turn's candidates, as labels for ``app.core.explain.permission_counts``.
"""

from __future__ import annotations

from typing import Any

from app.adapters.postgres.db import Database, Row, Sql
from app.adapters.postgres.knowledge import IN_SPACE, VISIBLE, ann_settings, visible_params
from app.adapters.postgres.sessions import VISIBLE_SQL
from app.core import fts
from app.core.embedding_space import EmbeddingSpace
from app.core.model import Acl, DataLevel, KnowledgeHit, Trust, Visibility
from app.core.refs import chunk_ref
from app.core.retrieval import POOL_MAX
from app.ports import KnowledgeQuery
from app.ports_explain import RecordedTurn, SourceKey, SourceLabels, TurnSelection

TURN_SQL = """
SELECT turn_id, key_id, body, recorded FROM manifests
WHERE tenant_id = :tenant_id AND turn_id = :turn_id
"""
# A replay's turns: the newest ``limit`` the selection names, handed back oldest first.
SELECT_SQL = """
SELECT * FROM (
  SELECT turn_id, key_id, body, recorded, created_at FROM manifests
  WHERE tenant_id = :tenant_id
    AND (cardinality(CAST(:turn_ids AS text[])) = 0 OR turn_id = ANY(CAST(:turn_ids AS text[])))
    AND (CAST(:session_id AS text) IS NULL OR session_id = :session_id)
    AND (CAST(:turn_from AS text) IS NULL OR turn_id >= :turn_from)
    AND (CAST(:turn_to AS text) IS NULL OR turn_id <= :turn_to)
  ORDER BY created_at DESC, turn_id DESC
  LIMIT :limit) AS newest
ORDER BY created_at, turn_id
"""
_LABELS = """c.doc_id, c.version, c.chunk_no, c.tenant_id, c.domain, c.sensitivity, c.trust,
    c.acl_all, c.acl_users, c.acl_groups, c.observed_at, c.expires_at, c.is_current"""
# A source: its document's current chunks, or the chunks of the version it names.
_SOURCE = """c.tenant_id = :tenant_id AND c.doc_id = :doc_id
    AND (CASE WHEN CAST(:version AS text) IS NULL THEN c.is_current
              ELSE c.version = CAST(:version AS text) END)
    AND (CAST(:chunk_no AS integer) IS NULL OR c.chunk_no = CAST(:chunk_no AS integer))"""
LABELS_SQL = f"SELECT {_LABELS} FROM knowledge_chunks c WHERE {_SOURCE} ORDER BY c.chunk_no"  # noqa: S608 - constant fragments, values are bound
VECTOR_RANK_SQL = f"""
WITH target AS (
    SELECT c.embedding <=> CAST(:embedding AS vector) AS distance
    FROM knowledge_chunks c WHERE {_SOURCE}{IN_SPACE}
)
SELECT 1 + (SELECT count(*) FROM knowledge_chunks c WHERE {VISIBLE}{IN_SPACE}
            AND c.embedding <=> CAST(:embedding AS vector) < t.distance) AS rank
FROM target t ORDER BY rank LIMIT 1
"""  # noqa: S608 - constant fragments, values are bound
_SCORE = "greatest(ts_rank(c.tsv, q.query), ts_rank(c.tsv_en, q.en))"
_MATCH = "(c.tsv @@ q.query OR c.tsv_en @@ q.en)"
_QUERY = "(SELECT to_tsquery('simple', :tsquery) AS query, to_tsquery('english', :tsquery) AS en)"
TEXT_RANK_SQL = f"""
WITH q AS MATERIALIZED {_QUERY},
target AS (SELECT {_SCORE} AS score FROM knowledge_chunks c, q WHERE {_SOURCE} AND {_MATCH})
SELECT 1 + (SELECT count(*) FROM knowledge_chunks c, q WHERE {VISIBLE} AND {_MATCH}
            AND {_SCORE} > t.score) AS rank
FROM target t ORDER BY rank LIMIT 1
"""  # noqa: S608 - constant fragments, values are bound
# The filter-free top k of each ranker: the tenant's current chunks only. The text pool is
# bounded as the search's is (FTS_RANK_MAX matches ranked, not the tenant's every match).
_TENANT = "c.tenant_id = :tenant_id AND c.is_current"
WITHHELD_SQL = f"""
WITH q AS MATERIALIZED {_QUERY},
near AS (
    SELECT c.id FROM knowledge_chunks c WHERE {_TENANT}{IN_SPACE}
        AND CAST(:embedding AS vector) IS NOT NULL
    ORDER BY c.embedding <=> CAST(:embedding AS vector) LIMIT :k
),
pool AS MATERIALIZED (
    SELECT c.id, {_SCORE} AS score FROM knowledge_chunks c, q
    WHERE {_TENANT} AND CAST(:tsquery AS text) IS NOT NULL AND {_MATCH} LIMIT 1000
),
best AS (SELECT id FROM pool ORDER BY score DESC, id LIMIT :k)
SELECT {_LABELS} FROM knowledge_chunks c
WHERE c.id IN (SELECT id FROM near UNION SELECT id FROM best)
    AND NOT coalesce(({VISIBLE}), false)
ORDER BY c.doc_id, c.version, c.chunk_no
"""  # noqa: S608 - constant fragments, values are bound
_S = {name: Sql(sql) for name, sql in {
    "turn": TURN_SQL, "select": SELECT_SQL, "labels": LABELS_SQL, "vector": VECTOR_RANK_SQL,
    "text": TEXT_RANK_SQL, "withheld": WITHHELD_SQL}.items()}
# One session among those a turn's transcript search may read: the search's own definition.
_REACH = {v: Sql(f"SELECT EXISTS (SELECT 1 FROM ({sql}) AS v WHERE v.session_id = :target)")  # noqa: S608 - constant fragments, values are bound
          for v, sql in VISIBLE_SQL.items()}


def _labels(row: Row) -> KnowledgeHit:
    return KnowledgeHit(
        chunk_ref=chunk_ref(row.doc_id, row.version, row.chunk_no), doc_id=row.doc_id,
        version=row.version, chunk_no=row.chunk_no, text="", tenant_id=row.tenant_id,
        domain=row.domain, sensitivity=DataLevel(row.sensitivity), trust=Trust(row.trust),
        acl=Acl(whole_tenant=row.acl_all, users=tuple(row.acl_users),
                groups=tuple(row.acl_groups)),
        observed_at=row.observed_at, expires_at=row.expires_at, rank=0, ranker="labels",
        tokens=0)


def _source(tenant_id: str, source: SourceKey) -> dict[str, Any]:
    return {"tenant_id": tenant_id, "doc_id": source.doc_id, "version": source.version,
            "chunk_no": source.chunk_no}


class PgExplainReader:
    """``space``: the vectors a query is compared with, as the knowledge store's."""

    def __init__(self, db: Database, *, space: EmbeddingSpace | None = None) -> None:
        self._db = db
        self._space = {"spaces": None, "legacy": None} if space is None else {
            "spaces": list(space.accepted), "legacy": space.legacy}

    async def turn(self, *, tenant_id: str, turn_id: str) -> RecordedTurn | None:
        async with self._db.read_tx(tenant_id) as conn:
            row = await conn.fetchrow(_S["turn"], {"tenant_id": tenant_id, "turn_id": turn_id})
        if row is None:
            return None
        return RecordedTurn(turn_id=row.turn_id, key_id=row.key_id, body=row.body,
                            recorded=row.recorded)

    async def select(self, *, tenant_id: str, selection: TurnSelection
                     ) -> list[RecordedTurn]:
        async with self._db.read_tx(tenant_id) as conn:
            rows = await conn.fetch(_S["select"], {
                "tenant_id": tenant_id, "turn_ids": list(selection.turn_ids),
                "session_id": selection.session_id, "turn_from": selection.turn_id_from,
                "turn_to": selection.turn_id_to, "limit": selection.limit})
        return [RecordedTurn(turn_id=r.turn_id, key_id=r.key_id, body=r.body,
                             recorded=r.recorded) for r in rows]

    async def labels(self, *, tenant_id: str, source: SourceKey) -> SourceLabels | None:
        async with self._db.read_tx(tenant_id) as conn:
            rows = await conn.fetch(_S["labels"], _source(tenant_id, source))
        if not rows:
            return None
        return SourceLabels(chunks=[_labels(r) for r in rows],
                            current=any(r.is_current for r in rows))

    async def ranks(self, *, query: KnowledgeQuery, source: SourceKey) -> dict[str, int]:
        params = {**visible_params(query), **_source(query.tenant_id, source)}
        tsquery = fts.tsquery(query.text)
        out: dict[str, int] = {}
        async with self._db.read_tx(query.tenant_id) as conn:
            if query.embedding is not None:
                rank = await conn.fetchval(_S["vector"], {
                    **params, **self._space, "embedding": list(query.embedding)})
                if rank is not None:
                    out["vector"] = int(rank)
            if tsquery is not None:
                rank = await conn.fetchval(_S["text"], {**params, "tsquery": tsquery})
                if rank is not None:
                    out["fts"] = int(rank)
        return out

    async def withheld(self, *, query: KnowledgeQuery) -> list[KnowledgeHit]:
        tsquery = fts.tsquery(query.text)
        if query.k <= 0 or (query.embedding is None and tsquery is None):
            return []
        params = {**visible_params(query), **self._space, "tsquery": tsquery,
                  "embedding": None if query.embedding is None else list(query.embedding),
                  "k": min(query.k, POOL_MAX)}
        async with self._db.read_tx(query.tenant_id, ann_settings(query.k)) as conn:
            rows = await conn.fetch(_S["withheld"], params)
        return [_labels(r) for r in rows]

    async def visible(self, *, tenant_id: str, user_id: str, session_id: str | None,
                      agent_id: str | None, visibility: Visibility, target: str) -> bool:
        async with self._db.read_tx(tenant_id) as conn:
            return bool(await conn.fetchval(_REACH[visibility], {
                "tenant_id": tenant_id, "user_id": user_id, "session_id": session_id,
                "agent_id": agent_id, "target": target}))
