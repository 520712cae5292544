"""Knowledge documents and their searchable chunks (``KnowledgeStore``).

Ingest (``upsert``; ``upsert_many`` writes a batch in one transaction, its documents'
locks taken up front in one statement, in hash order, so two batches cannot deadlock), one
transaction under a per-document advisory lock:
- a version is the client's label; the document's ``revision`` orders its versions by first
  ingest (1, 2, ...), and re-ingesting the same ``(doc_id, version)`` deletes and rewrites it
  under its old revision (idempotent);
- a version is current unless a version of a higher revision exists; making a version current
  marks every other version of the document and its chunks ``is_current = false`` in the same
  transaction, so a search never sees two versions of one document.

Management (``list_documents``, ``get_document``, ``delete_document``) sees a document by its
current version, and only within the caller's bounds (data level, domains): outside them it
is absent, the same as a missing one. A delete removes every version (its chunks cascade) and
writes its audit record in the same transaction.

Search pushes the whole permission decision down into SQL (``VISIBLE``): tenant, current
version, ACL (whole tenant, user, or any shared group), domain (NULL-domain chunks always;
domain chunks only for that exact domain, none when the query has no domain), sensitivity at
or below the level, not expired at ``query.now``.

Vector search copes with the filtered-HNSW trap (an index scan that stops after ef_search
candidates, most of them filtered away): below ``EXACT_MAX_ROWS`` visible chunks an exact
scan over the filtered rows is cheap and has recall 1.0, which a small tenant beside a large
one needs. So the exact scan runs first, capped at ``EXACT_MAX_ROWS`` rows and reporting how
many it saw: under the cap its answer is the exact top k; at the cap the permission filter
is remembered as large for ``LARGE_TTL_S`` and HNSW runs instead, with
``hnsw.iterative_scan = relaxed_order`` (re-sorted afterwards); if that still returns fewer
than ``k`` rows the uncapped exact scan runs; a vector hit carries its cosine similarity
(``1 - distance``), what the relevance floor judges. Full-text search ranks a bounded pool of
matches by ``ts_rank``, the query being the OR of the lexemes from ``app.core.fts`` matched
two ways: exactly (``tsv``, ``simple``: CJK bigrams, identifiers) or stemmed (``tsv_en``,
``english``: "researching" finds "research"); a chunk scores the better of the two, and
carries its cosine similarity too when the query has a vector. ``k`` is
the turn's depth (``app.core.retrieval``), at most ``POOL_MAX`` rows per ranker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from app.adapters.postgres.audit import insert_records
from app.adapters.postgres.codec import dumps, vector_literal
from app.adapters.postgres.db import Database, Row, Sql, Tx
from app.core import fts
from app.core.embedding_space import EmbeddingSpace
from app.core.model import Acl, DataLevel, KnowledgeHit, Trust, tagged_findings, untag_findings
from app.core.refs import chunk_ref
from app.core.retrieval import POOL_MAX
from app.ports import AuditRecord, DocumentBounds, DocumentInfo, KnowledgeQuery, NewDocument

EXACT_MAX_ROWS = 1000  # exact search over <= 1k filtered vectors costs a few ms
# At 100k chunks with a tenant holding 22% of them (100 queries, the bench's recall set):
# ef_search 40 gave recall@10 0.91, 100 gave 0.95 with one query finding none of its ten,
# 150 gives 0.98 (worst query 0.7) and 200 0.99, at search p50 3.1 / 3.3 / 3.7 ms once the
# index is in shared buffers (docs/benchmarks.md). 150: the margin, for ~6 % more time.
EF_SEARCH_MIN = 150


def ann_settings(k: int) -> dict[str, str]:
    """The HNSW settings a search for ``k`` rows runs with: set in the transaction's opening
    query (also a turn's ``shared_reads``), so the HNSW path costs no extra round trip; they
    change nothing for the exact scan or the other layers' reads."""
    return {"hnsw.iterative_scan": "relaxed_order",
            "hnsw.ef_search": str(min(1000, max(EF_SEARCH_MIN, 2 * k)))}

# Only a filter seen at the cap is remembered (a smaller one costs nothing to re-find: the
# capped scan is its answer), per permission filter for a while; this process's ingest of a
# tenant forgets the tenant's. A stale one (the set shrank: another worker's erasure, expiry)
# costs exactness for up to LARGE_TTL_S (HNSW's ~0.96 recall where exact's 1.0 was due), never
# permission, which every query applies itself. Counting first instead cost a second scan of
# the same rows on every filter not remembered.
LARGE_TTL_S = 30.0
LARGE_MEMO_MAX = 4096

VISIBLE = """
    c.tenant_id = :tenant_id AND c.is_current
    AND (c.acl_all OR :user_id = ANY (c.acl_users) OR c.acl_groups && CAST(:groups AS text[]))
    AND (c.domain IS NULL OR c.domain = CAST(:domain AS text))
    AND c.sensitivity <= :max_level
    AND (c.expires_at IS NULL OR c.expires_at > :now)
"""
# A vector search compares the query only with vectors of its space (``:spaces``: the
# provenances ``EmbeddingSpace.accepted``; NULL: every row, for a store given no space); a
# NULL provenance is the legacy model's. A filter on the row, so HNSW still drives the scan.
IN_SPACE = """
    AND (CAST(:spaces AS text[]) IS NULL
         OR coalesce(c.embedder, CAST(:legacy AS text)) = ANY (CAST(:spaces AS text[])))
"""
_HIT = """c.doc_id, c.version, c.chunk_no, c.text, c.tenant_id, c.domain, c.sensitivity,
    c.trust, c.acl_all, c.acl_users, c.acl_groups, c.observed_at, c.expires_at, c.tokens,
    c.tokenizer, c.findings"""

# MATERIALIZED: the ORDER BY runs over the filtered rows, so the planner cannot pick HNSW.
# The scan carries only ids and distances; the k nearest rows are read afterwards (carrying
# every visible row's text through the sort cost ~10 % more). ``:cap`` bounds the scan (NULL:
# none); ``visible`` is how many rows it saw, so a scan that reached the cap is known to be
# a sample, not the answer.
SEARCH_EXACT_SQL = f"""
WITH visible AS MATERIALIZED (
    SELECT c.id, c.embedding <=> CAST(:embedding AS vector) AS distance
    FROM knowledge_chunks c WHERE {VISIBLE}{IN_SPACE} LIMIT :cap
), nearest AS (SELECT id, distance FROM visible ORDER BY distance, id LIMIT :k)
SELECT {_HIT}, n.distance, (SELECT count(*) FROM visible) AS visible
FROM nearest n JOIN knowledge_chunks c ON c.id = n.id
ORDER BY n.distance, n.id
"""  # noqa: S608 - constant fragments, values are bound
# relaxed_order may return rows slightly out of order: the outer query re-sorts them.
SEARCH_ANN_SQL = f"""
WITH nearest AS MATERIALIZED (
    SELECT {_HIT}, c.embedding <=> CAST(:embedding AS vector) AS distance
    FROM knowledge_chunks c WHERE {VISIBLE}{IN_SPACE}
    ORDER BY distance LIMIT :k
)
SELECT * FROM nearest ORDER BY distance
"""  # noqa: S608 - constant fragments, values are bound
# Ranking is the cost of a lexical search, and a broad OR query matches a share of the
# tenant, so ranking every match grew with the corpus (28 ms at 5k chunks, ~10x at 50k).
# Ranked instead: the first FTS_RANK_MAX matches, by ts_rank (term frequency: chunks holding
# more of the terms first; a third of ts_rank_cd's cost, which reads positions). Bounded at
# ~5 ms whatever the corpus; a tenant with more matches than that has an arbitrary pool, and
# the vector leg carries recall there. The pool carries ids and scores only, and the k best
# rows are read afterwards: ~20 % less than ranking whole rows. The query is parsed once, as
# a row of its own (as memories and transcripts do): written inline, a generic plan (which
# PostgreSQL picks for this statement once a few tenants' custom plans cost more) parsed it
# again for every row it matched and ranked, 14 ms instead of 5 for a 5k-chunk tenant. An
# all-terms pre-pass was tried: with no full match it filtered the tenant's every row (~45 ms
# at 50k chunks), because the planner will not use GIN for an AND of frequent terms.
FTS_RANK_MAX = 1000
# Two tsvectors of one normalized text: the english one stems (its stop words are dropped from
# the query by app.core.fts before it gets here); the planner ORs their GIN bitmaps. A hit
# found by words carries its cosine too (``distance``; NULL without a query vector or for a
# row of another embedding space): the relevance guard then judges it by meaning as well,
# not as a hit whose meaning is unknown (docs/architecture.md). Ranked by ts_rank, not by
# the terms' rarity: a rarity pool (which terms each of up to FTS_RANK_MAX matches holds)
# cost a detoast of both tsvectors per term and row, +30 ms per turn on the bench's large
# corpus (docs/benchmarks.md, session 8); the guard weighs rarity among the candidates.
SEARCH_TEXT_SQL = f"""
WITH pool AS MATERIALIZED (
    SELECT c.id, greatest(ts_rank(c.tsv, q.query), ts_rank(c.tsv_en, e.en)) AS score
    FROM knowledge_chunks c,
         to_tsquery('simple', :tsquery) AS q(query), to_tsquery('english', :tsquery) AS e(en)
    WHERE {VISIBLE} AND (c.tsv @@ q.query OR c.tsv_en @@ e.en)
    LIMIT {FTS_RANK_MAX}
), best AS (SELECT id, score FROM pool ORDER BY score DESC, id LIMIT :k)
SELECT {_HIT}, b.score,
    CASE WHEN CAST(:embedding AS vector) IS NOT NULL{IN_SPACE}
         THEN c.embedding <=> CAST(:embedding AS vector) END AS distance
FROM best b JOIN knowledge_chunks c ON c.id = b.id
ORDER BY b.score DESC, b.id
"""  # noqa: S608 - constant fragments, values are bound

# Every document of a write, locked in the order of the lock keys: the subquery sorts the
# distinct keys before the outer projection takes the locks.
LOCK_DOCS_SQL = """
SELECT count(pg_advisory_xact_lock(k)) FROM (
    SELECT DISTINCT hashtextextended(:tenant_id || '/' || d, 0) AS k
    FROM unnest(CAST(:doc_ids AS text[])) AS d ORDER BY k
) AS keys
"""
DELETE_VERSION_SQL = """
DELETE FROM knowledge_documents
WHERE tenant_id = :tenant_id AND doc_id = :doc_id AND version = :version
RETURNING revision
"""
# ``:revision``: the rewritten version's own, or NULL for a new version (the next one).
INSERT_DOC_SQL = """
INSERT INTO knowledge_documents (tenant_id, doc_id, version, revision, title, domain,
    sensitivity, trust, acl_all, acl_users, acl_groups, observed_at, expires_at, source,
    is_current)
SELECT :tenant_id, :doc_id, :version, r.revision, :title, :domain, :sensitivity, :trust,
    :acl_all, CAST(:acl_users AS text[]), CAST(:acl_groups AS text[]), :observed_at,
    :expires_at, :source,
    NOT EXISTS (SELECT 1 FROM knowledge_documents d WHERE d.tenant_id = :tenant_id
                AND d.doc_id = :doc_id AND d.revision > r.revision)
FROM (SELECT COALESCE(CAST(:revision AS integer),
                      (SELECT COALESCE(max(d.revision), 0) + 1 FROM knowledge_documents d
                       WHERE d.tenant_id = :tenant_id AND d.doc_id = :doc_id)) AS revision) r
RETURNING is_current
"""
SUPERSEDE_DOCS_SQL = """
UPDATE knowledge_documents SET is_current = false
WHERE tenant_id = :tenant_id AND doc_id = :doc_id AND version <> :version AND is_current
"""
SUPERSEDE_CHUNKS_SQL = """
UPDATE knowledge_chunks SET is_current = false
WHERE tenant_id = :tenant_id AND doc_id = :doc_id AND version <> :version AND is_current
"""
INSERT_CHUNKS_SQL = """
INSERT INTO knowledge_chunks (tenant_id, doc_id, version, chunk_no, text, tokens, tokenizer,
    findings, embedding, embedder, search_text, domain, sensitivity, trust, acl_all, acl_users,
    acl_groups, observed_at, expires_at, is_current)
SELECT :tenant_id, :doc_id, :version, ch.chunk_no, ch.text, ch.tokens, :tokenizer,
    CAST(ch.findings AS jsonb), CAST(ch.embedding AS vector), ch.embedder, ch.search_text,
    :domain,
    :sensitivity, :trust, :acl_all, CAST(:acl_users AS text[]), CAST(:acl_groups AS text[]),
    :observed_at, :expires_at, :is_current
FROM unnest(CAST(:chunk_nos AS integer[]), CAST(:texts AS text[]), CAST(:tokens AS integer[]),
            CAST(:findings AS text[]), CAST(:embeddings AS text[]),
            CAST(:embedders AS text[]), CAST(:search_texts AS text[]))
     AS ch(chunk_no, text, tokens, findings, embedding, embedder, search_text)
"""
# A document as management sees it: its current version, within the caller's bounds.
_INFO = """
SELECT d.doc_id, d.version, d.revision, d.title, d.domain, d.sensitivity, d.trust, d.acl_all,
    d.acl_users, d.acl_groups, d.observed_at, d.expires_at, d.source, d.created_at AS updated_at,
    v.created_at, v.versions,
    (SELECT count(*) FROM knowledge_chunks c WHERE c.tenant_id = d.tenant_id
     AND c.doc_id = d.doc_id AND c.version = d.version) AS chunks
FROM knowledge_documents d,
     LATERAL (SELECT min(o.created_at) AS created_at, count(*) AS versions
              FROM knowledge_documents o
              WHERE o.tenant_id = d.tenant_id AND o.doc_id = d.doc_id) v
WHERE d.tenant_id = :tenant_id AND d.is_current AND d.sensitivity <= :max_level
    AND (CAST(:domains AS text[]) IS NULL OR d.domain = ANY (CAST(:domains AS text[])))
"""
LIST_DOCS_SQL = _INFO + """
    AND (CAST(:after AS text) IS NULL OR d.doc_id > :after)
ORDER BY d.doc_id LIMIT :limit
"""
GET_DOC_SQL = _INFO + "    AND d.doc_id = :doc_id"
DELETE_DOC_SQL = "DELETE FROM knowledge_documents WHERE tenant_id = :tenant_id AND doc_id = :doc_id"
_S = {name: Sql(sql) for name, sql in {
    "exact": SEARCH_EXACT_SQL, "ann": SEARCH_ANN_SQL,
    "fts": SEARCH_TEXT_SQL, "lock": LOCK_DOCS_SQL,
    "delete": DELETE_VERSION_SQL, "doc": INSERT_DOC_SQL, "old_docs": SUPERSEDE_DOCS_SQL,
    "old_chunks": SUPERSEDE_CHUNKS_SQL, "chunks": INSERT_CHUNKS_SQL,
    "list": LIST_DOCS_SQL, "get": GET_DOC_SQL, "delete_doc": DELETE_DOC_SQL,
}.items()}


def visible_params(query: KnowledgeQuery) -> dict[str, Any]:
    """Bind parameters of ``VISIBLE`` for ``query``."""
    return {
        "tenant_id": query.tenant_id,
        "user_id": query.user_id,
        "groups": list(query.groups),
        "domain": query.domain,
        "max_level": int(query.max_level),
        "now": query.now,
    }


def _hit(row: Row, rank: int, ranker: str, *, tokenizer: str, detectors: str) -> KnowledgeHit:
    return KnowledgeHit(
        chunk_ref=chunk_ref(row.doc_id, row.version, row.chunk_no),
        doc_id=row.doc_id,
        version=row.version,
        chunk_no=row.chunk_no,
        text=row.text,
        tenant_id=row.tenant_id,
        domain=row.domain,
        sensitivity=DataLevel(row.sensitivity),
        trust=Trust(row.trust),
        acl=Acl(whole_tenant=row.acl_all, users=tuple(row.acl_users),
                groups=tuple(row.acl_groups)),
        observed_at=row.observed_at,
        expires_at=row.expires_at,
        rank=rank,
        ranker=ranker,
        tokens=row.tokens if row.tokenizer == tokenizer else None,
        findings=untag_findings(row.findings, detectors),
        similarity=None if row.distance is None else 1.0 - float(row.distance),
    )


def _info(row: Row) -> DocumentInfo:
    return DocumentInfo(
        doc_id=row.doc_id, version=row.version, revision=row.revision, versions=row.versions,
        title=row.title, domain=row.domain, sensitivity=DataLevel(row.sensitivity),
        trust=Trust(row.trust),
        acl=Acl(whole_tenant=row.acl_all, users=tuple(row.acl_users),
                groups=tuple(row.acl_groups)),
        chunks=row.chunks, observed_at=row.observed_at, expires_at=row.expires_at,
        source=row.source, created_at=row.created_at, updated_at=row.updated_at)


def _bounds_params(bounds: DocumentBounds) -> dict[str, Any]:
    return {"tenant_id": bounds.tenant_id, "max_level": int(bounds.max_level),
            "domains": None if bounds.domains is None else list(bounds.domains)}


def _doc_params(tenant_id: str, doc: NewDocument) -> dict[str, Any]:
    return {
        "tenant_id": tenant_id,
        "doc_id": doc.doc_id,
        "version": doc.version,
        "domain": doc.domain,
        "sensitivity": int(doc.sensitivity),
        "trust": doc.trust.value,
        "acl_all": doc.acl.whole_tenant,
        "acl_users": list(doc.acl.users),
        "acl_groups": list(doc.acl.groups),
        "observed_at": doc.observed_at,
        "expires_at": doc.expires_at,
    }


class PgKnowledgeStore:
    """``tokenizer`` names the counter that made ``NewChunk.tokens``, ``detectors`` the
    fingerprint of the detector code that made ``NewChunk.findings``: stored with each chunk,
    and a hit carries a stored count or findings only when the same made them. ``space``: the
    vectors a query is compared with (None: all)."""

    def __init__(self, db: Database, *, tokenizer: str, detectors: str,
                 space: EmbeddingSpace | None = None) -> None:
        self._db = db
        self._space = {"spaces": None, "legacy": None} if space is None else {
            "spaces": list(space.accepted), "legacy": space.legacy}
        self._tokenizer = tokenizer
        self._detectors = detectors
        self._large: dict[tuple[Any, ...], float] = {}  # filter -> remembered until

    async def upsert(self, *, tenant_id: str, document: NewDocument) -> int:
        return (await self.upsert_many(tenant_id=tenant_id, documents=[document]))[0]

    async def upsert_many(self, *, tenant_id: str, documents: Sequence[NewDocument]
                          ) -> list[int]:
        """Each document as ``upsert`` would write it, in order, all in one transaction
        (all or nothing); a document named twice ends as its last write."""
        self._large = {k: v for k, v in self._large.items() if k[0] != tenant_id}
        async with self._db.tenant_tx(tenant_id) as conn:
            await conn.execute(_S["lock"], {"tenant_id": tenant_id,
                                            "doc_ids": [d.doc_id for d in documents]})
            return [await self._write(conn, tenant_id, d) for d in documents]

    async def _write(self, conn: Tx, tenant_id: str, document: NewDocument) -> int:
        doc = _doc_params(tenant_id, document)
        key = {k: doc[k] for k in ("tenant_id", "doc_id", "version")}
        revision = await conn.fetchval(_S["delete"], key)
        is_current = await conn.fetchval(_S["doc"], {
            **doc, "revision": revision, "title": document.title, "source": document.source,
        })
        if is_current:
            await conn.execute(_S["old_docs"], key)
            await conn.execute(_S["old_chunks"], key)
        if document.chunks:
            chunks = document.chunks
            await conn.execute(_S["chunks"], {
                **doc,
                "is_current": is_current,
                "tokenizer": self._tokenizer,
                "findings": [None if c.findings is None
                             else dumps(tagged_findings(c.findings, self._detectors))
                             for c in chunks],
                "chunk_nos": [c.chunk_no for c in chunks],
                "texts": [c.text for c in chunks],
                "tokens": [c.tokens for c in chunks],
                "embeddings": [vector_literal(c.embedding) for c in chunks],
                "embedders": [c.embedder for c in chunks],
                "search_texts": [fts.normalize(c.text) for c in chunks],
            })
        return len(document.chunks)

    async def list_documents(self, *, bounds: DocumentBounds, after: str | None, limit: int
                             ) -> list[DocumentInfo]:
        async with self._db.read_tx(bounds.tenant_id) as conn:
            rows = await conn.fetch(_S["list"], {**_bounds_params(bounds), "after": after,
                                                 "limit": limit})
        return [_info(r) for r in rows]

    async def get_document(self, *, bounds: DocumentBounds, doc_id: str
                           ) -> DocumentInfo | None:
        async with self._db.read_tx(bounds.tenant_id) as conn:
            row = await conn.fetchrow(_S["get"], {**_bounds_params(bounds), "doc_id": doc_id})
        return None if row is None else _info(row)

    async def delete_document(self, *, bounds: DocumentBounds, doc_id: str,
                              audit: Callable[[DocumentInfo], AuditRecord]
                              ) -> DocumentInfo | None:
        """Under the document's ingest lock, so a concurrent ingest lands before or after."""
        tenant_id = bounds.tenant_id
        self._large = {k: v for k, v in self._large.items() if k[0] != tenant_id}
        async with self._db.tenant_tx(tenant_id) as conn:
            await conn.execute(_S["lock"], {"tenant_id": tenant_id, "doc_ids": [doc_id]})
            row = await conn.fetchrow(_S["get"], {**_bounds_params(bounds), "doc_id": doc_id})
            if row is None:
                return None
            info = _info(row)
            await conn.execute(_S["delete_doc"], {"tenant_id": tenant_id, "doc_id": doc_id})
            await insert_records(conn, tenant_id, [audit(info)])
        return info

    async def search_vector(self, *, query: KnowledgeQuery) -> list[KnowledgeHit]:
        if query.embedding is None or query.k <= 0:
            return []
        params = {**visible_params(query), **self._space,
                  "embedding": list(query.embedding), "k": min(query.k, POOL_MAX)}
        async with self._db.read_tx(query.tenant_id, ann_settings(query.k)) as conn:
            rows = await self._nearest(conn, query, params)
        return self._hits(rows, "vector")

    async def _nearest(self, conn: Tx, query: KnowledgeQuery, params: dict[str, Any]
                       ) -> list[Row]:
        key = (query.tenant_id, query.user_id, query.groups, query.domain, query.max_level,
               EXACT_MAX_ROWS)
        now = time.monotonic()
        if self._large.get(key, 0.0) <= now:
            rows = await conn.fetch(_S["exact"], {**params, "cap": EXACT_MAX_ROWS})
            if not rows or rows[0].visible < EXACT_MAX_ROWS:
                return rows
            if len(self._large) >= LARGE_MEMO_MAX:
                self._large.clear()  # crude but bounded; the next turns find them again
            self._large[key] = now + LARGE_TTL_S
        rows = await conn.fetch(_S["ann"], params)
        if len(rows) < query.k:  # iterative scan hit hnsw.max_scan_tuples before finding k
            rows = await conn.fetch(_S["exact"], {**params, "cap": None})
        return rows

    async def search_text(self, *, query: KnowledgeQuery) -> list[KnowledgeHit]:
        tsquery = fts.tsquery(query.text)
        if tsquery is None or query.k <= 0:
            return []
        params = {**visible_params(query), **self._space, "tsquery": tsquery,
                  "k": min(query.k, POOL_MAX),
                  "embedding": None if query.embedding is None else list(query.embedding)}
        async with self._db.read_tx(query.tenant_id) as conn:
            rows = await conn.fetch(_S["fts"], params)
        return self._hits(rows, "fts")

    def _hits(self, rows: list[Row], ranker: str) -> list[KnowledgeHit]:
        return [_hit(r, i, ranker, tokenizer=self._tokenizer, detectors=self._detectors)
                for i, r in enumerate(rows, start=1)]
