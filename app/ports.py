"""Ports: the small Protocols through which the service reaches its stores and models.

Every method that touches tenant data takes ``tenant_id`` first; the Postgres adapters set it
as the transaction's ``app.tenant_id`` (for Row-Level Security) *and* filter on it in SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from app.core.embedding_space import EmbeddingSpace, Provenance
from app.core.memory_gate import Existing, GateDecision, MemoryWrite
from app.core.model import (
    Acl,
    AssertionPolicy,
    DataLevel,
    Finding,
    KnowledgeHit,
    MemoryHit,
    MemoryRecord,
    Principal,
    Role,
    SessionEvent,
    SessionInfo,
    TaskCheckpoint,
    TranscriptHit,
    Trust,
    Visibility,
)
from app.core.paging import Position
from app.core.quotas import QuotaDecision, QuotaLimits, QuotaOverride
from app.core.registry import Binding, BundleRevision, Channel
from app.core.release_gate import Evaluation, GateRecord, ReleaseGate, Review
from app.core.session_state import SessionState

Vector = Sequence[float]


@dataclass(frozen=True, slots=True, kw_only=True)
class NewKey:
    tenant_id: str
    role: Role
    max_data_level: DataLevel
    domains: tuple[str, ...] | None
    name: str
    max_session_visibility: Visibility = Visibility.TREE


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptQuery:
    """A search of the caller's own sessions: by words and, with an embedding, by meaning."""

    tenant_id: str
    user_id: str
    session_id: str | None  # None: a stateless turn (only ``all``/``agent`` open anything)
    agent_id: str | None  # the agent a new session would belong to (``agent`` visibility)
    visibility: Visibility
    text: str
    embedding: Sequence[float] | None
    embedder: str | None  # only events this model embedded are compared with ``embedding``
    limit: int  # per ranker
    exclude_current: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantSettings:
    """What a tenant's admin sets for all of its turns."""

    default_session_visibility: Visibility = Visibility.TREE
    quota: QuotaOverride = field(default_factory=QuotaOverride)  # None fields: the server's
    bundle_release_gate: ReleaseGate = "lint"  # what promote requires (core.release_gate)


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyInfo:
    """A key as listed: what it may do and when it was made or revoked, never its secret or
    the secret's hash."""

    key_id: str
    tenant_id: str
    name: str
    role: Role
    max_data_level: DataLevel
    domains: tuple[str, ...] | None
    max_session_visibility: Visibility
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    type: str
    role: str | None = None
    content: str = ""
    call_id: str | None = None
    name: str | None = None
    arguments: Any = None
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOwner:
    user_id: str
    agent_id: str | None
    parent_session_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnAppend:
    """Events a turn appended: their seqs, and the events as stored when this call wrote
    them (``fresh``); a retry of the turn gets the recorded seqs, no events, ``fresh=False``."""

    seqs: list[int]
    stored: list[SessionEvent]
    fresh: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class NewChunk:
    chunk_no: int
    text: str
    tokens: int
    embedding: Vector
    findings: tuple[Finding, ...] | None = None  # the service's detectors' (None: not scanned)
    embedder: str | None = None  # its provenance (app.core.embedding_space); None: unknown


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientChunk:
    """A chunk as the client made it: its text and the client's embedding of it."""

    text: str
    embedding: Vector


@dataclass(frozen=True, slots=True, kw_only=True)
class NewDocument:
    doc_id: str
    version: str  # the client's label; the store orders versions by first ingest
    title: str | None
    domain: str | None
    sensitivity: DataLevel
    trust: Trust
    acl: Acl
    observed_at: datetime | None
    expires_at: datetime | None
    source: str | None
    chunks: tuple[NewChunk, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentBounds:
    """What a key may manage: documents at or below ``max_level``, in ``domains`` (None:
    any domain, and documents without one). Outside them a document is absent."""

    tenant_id: str
    max_level: DataLevel
    domains: tuple[str, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentInfo:
    """A stored document by its current version (no text); ``created_at`` is the oldest
    stored version's ingest, ``updated_at`` the current version's."""

    doc_id: str
    version: str
    revision: int
    versions: int
    title: str | None
    domain: str | None
    sensitivity: DataLevel
    trust: Trust
    acl: Acl
    chunks: int
    observed_at: datetime | None
    expires_at: datetime | None
    source: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeQuery:
    """A permission-bounded search: every field below is pushed down into SQL."""

    tenant_id: str
    user_id: str
    groups: tuple[str, ...]
    domain: str | None
    max_level: DataLevel
    now: datetime
    embedding: Vector | None
    text: str
    k: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredManifest:
    turn_id: str
    key_id: str
    request_sha256: str
    body: dict[str, Any]
    # What explain needs beside the body (app.core.explain.record_scope); written, never read
    # back with the manifest.
    recorded: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    turn_id: str | None
    kind: str  # e.g. "dropped.permission.acl", "key.created"
    principal: str  # key id or "platform"
    ref: str | None
    rule: str | None
    detail: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredCompaction:
    """One recorded compaction run of a session (``CompactionOutcome.record()`` + columns)."""

    compaction_id: str
    created_at: datetime
    cut_seq: int | None
    summary_sha256: str | None
    ok: bool
    consecutive_failures: int
    breaker_open: bool
    record: dict[str, Any]
    view: dict[str, Any] | None = None  # ``SessionView.to_json()``; None before 0006


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestFilter:
    """Newest first. Every condition is part of the query, so a page is full whenever more
    matching rows exist."""

    session_id: str | None = None
    task_id: str | None = None
    key_id: str | None = None  # only the manifests this key made (a runtime key's view)
    limit: int = 50
    before: str | None = None  # only manifests created before this instant (ISO 8601)
    after: Position | None = None  # keyset: resume strictly after this row


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestPage:
    manifests: list[StoredManifest]
    next: Position | None  # the last row's position when more rows match, else None


class KeyStore(Protocol):
    async def create(self, *, key: NewKey, key_hash: bytes) -> str: ...
    async def revoke(self, *, key_id: str) -> bool: ...
    async def list_keys(self, *, tenant_id: str | None) -> list[KeyInfo]:
        """Every key of ``tenant_id`` (all tenants: None), revoked ones too, by tenant and
        creation."""
        ...
    async def principal(self, *, key_hash: bytes) -> Principal | None: ...
    async def set_assertion_policy(self, *, tenant_id: str, policy: AssertionPolicy) -> None: ...
    async def tenant_settings(self, *, tenant_id: str) -> TenantSettings: ...
    async def set_tenant_settings(self, *, tenant_id: str, settings: TenantSettings) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CanaryInfo:
    """A registered leakage canary (operator data; ``text`` never leaves the operator's routes
    and the workers' matcher)."""

    canary_id: str
    tenant_id: str
    user_id: str | None
    label: str
    text: str
    created_by: str
    created_at: datetime


class CanaryStore(Protocol):
    """The platform's leakage-canary registry; read by the service's own platform-level
    queries, never through a tenant session."""

    async def create(self, *, tenant_id: str, user_id: str | None, label: str, text: str,
                     created_by: str) -> CanaryInfo: ...
    async def list_canaries(self, *, tenant_id: str | None) -> list[CanaryInfo]: ...
    async def delete(self, *, canary_id: str) -> bool: ...
    async def revision(self) -> int:
        """Moves on every create and delete: a worker reloads the list only when it moved."""
        ...


class SessionArchive(Protocol):
    """Durable session history in Postgres: the source of truth for the Redis tail."""

    async def info(self, *, tenant_id: str, session_id: str) -> SessionInfo | None: ...
    async def append(
        self, *, tenant_id: str, session_id: str, owner: SessionOwner, events: Sequence[NewEvent]
    ) -> tuple[SessionInfo, list[SessionEvent]]: ...
    async def append_once(
        self, *, tenant_id: str, session_id: str, owner: SessionOwner,
        events: Sequence[NewEvent], turn_id: str, request_sha256: str
    ) -> TurnAppend:
        """``append``, at most once per (tenant, ``turn_id``): the first call appends and
        records the turn in the same transaction; a later (or concurrent) call with the same
        ``request_sha256`` appends nothing and answers the recorded seqs; another request
        under that turn_id raises ``Conflict``."""
        ...
    async def events(
        self, *, tenant_id: str, session_id: str, after_seq: int, limit: int
    ) -> list[SessionEvent]: ...
    async def tail(self, *, tenant_id: str, session_id: str, n: int) -> list[SessionEvent]: ...
    async def search(self, *, query: TranscriptQuery) -> list[TranscriptHit]:
        """Transcript search over the sessions ``query.visibility`` opens to its user (the
        owner of ``session_id`` when it exists, checked by the caller): the full-text hits
        ranked, then — with an embedding — the nearest events this embedder embedded."""
        ...
    async def unembedded(self, *, tenant_id: str, session_id: str, limit: int
                         ) -> list[tuple[int, str]]:
        """(seq, content) of the session's searchable events not embedded yet, oldest first."""
        ...
    async def set_embeddings(self, *, tenant_id: str, session_id: str,
                             embeddings: Sequence[tuple[int, Sequence[float]]], embedder: str
                             ) -> None: ...


class SessionTail(Protocol):
    """The hot tail of a session in Redis: bounded, expiring, rebuildable from the archive."""

    async def read(self, *, tenant_id: str, session_id: str) -> list[SessionEvent]: ...
    async def append(
        self, *, tenant_id: str, session_id: str, events: Sequence[SessionEvent]
    ) -> None: ...
    async def replace(
        self, *, tenant_id: str, session_id: str, events: Sequence[SessionEvent]
    ) -> None: ...


class TaskStore(Protocol):
    async def put(
        self, *, tenant_id: str, checkpoint: TaskCheckpoint, expected_revision: int | None
    ) -> int: ...
    async def get(
        self, *, tenant_id: str, task_id: str, revision: int | None = None
    ) -> TaskCheckpoint | None: ...


class CompactionStore(Protocol):
    """Recorded compaction runs per session; the latest carries the breaker state."""

    async def latest(self, *, tenant_id: str, session_id: str) -> StoredCompaction | None: ...
    async def insert(self, *, tenant_id: str, session_id: str, record: dict[str, Any],
                     summary: str, view: dict[str, Any] | None = None) -> None: ...


class SessionStateStore(Protocol):
    """The committed state of a session without a task (a ``TaskCheckpoint`` value with an
    empty ``task_id``) and the last event committed into it, one per session."""

    async def get(self, *, tenant_id: str, session_id: str) -> SessionState | None: ...
    async def put(self, *, tenant_id: str, session_id: str, state: SessionState,
                  expected_revision: int) -> int:
        """The new revision; ``StaleRevision`` unless the stored one is ``expected_revision``
        (0: none)."""
        ...


class ChunkReader(Protocol):
    async def relied(self, *, tenant_id: str, session_id: str, turns: int) -> list[str]:
        """The ``kb://`` refs the envelopes of the session's last ``turns`` turns carried (as
        their manifests record them), newest first, once each."""
        ...

    async def chunks(self, *, query: KnowledgeQuery, refs: Sequence[str]
                     ) -> list[KnowledgeHit]:
        """The current, visible (``query``'s permission pushed down, as a search) chunks
        named by ``refs`` (``app.core.refs.chunk_ref``); an unknown or hidden one is absent."""
        ...


class KnowledgeStore(Protocol):
    async def upsert(self, *, tenant_id: str, document: NewDocument) -> int: ...
    async def upsert_many(self, *, tenant_id: str, documents: Sequence[NewDocument]
                          ) -> list[int]:
        """``upsert`` of each, in order, in one transaction; the chunk count of each."""
        ...
    async def search_vector(self, *, query: KnowledgeQuery) -> list[KnowledgeHit]: ...
    async def search_text(self, *, query: KnowledgeQuery) -> list[KnowledgeHit]: ...
    async def list_documents(self, *, bounds: DocumentBounds, after: str | None, limit: int
                             ) -> list[DocumentInfo]:
        """Up to ``limit`` documents within ``bounds``, ordered by ``doc_id``, after ``after``."""
        ...
    async def get_document(self, *, bounds: DocumentBounds, doc_id: str
                           ) -> DocumentInfo | None: ...
    async def delete_document(self, *, bounds: DocumentBounds, doc_id: str,
                              audit: Callable[[DocumentInfo], AuditRecord]
                              ) -> DocumentInfo | None:
        """Every version of the document and its chunks, with ``audit(info)`` written in the
        same transaction; None (nothing done) when it is not within ``bounds``."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestWrite:
    """What ``ManifestStore.insert`` did."""

    existing: StoredManifest | None  # already stored under that turn_id: nothing was written
    # Inserted: the ``stable_prefix_sha256`` of the session's previous turn (None: none).
    previous_prefix_sha256: str | None = None


class ManifestStore(Protocol):
    async def insert(
        self, *, tenant_id: str, manifest: StoredManifest, audit: Sequence[AuditRecord],
        replay: bytes | None = None,
    ) -> ManifestWrite:
        """Insert manifest, its audit records and (a client turn) its ``replay`` entry in
        one transaction; a ``turn_id`` already stored writes nothing and returns that one."""
        ...

    async def replay(self, *, tenant_id: str, turn_id: str, max_age_s: int) -> bytes | None:
        """The replay entry stored with a manifest, if younger than ``max_age_s``."""
        ...

    async def get(self, *, tenant_id: str, turn_id: str) -> StoredManifest | None: ...
    async def list(self, *, tenant_id: str, filt: ManifestFilter) -> ManifestPage: ...


class AuditLog(Protocol):
    async def write(self, *, tenant_id: str, records: Sequence[AuditRecord]) -> None: ...
    async def list(
        self, *, tenant_id: str, turn_id: str | None, limit: int
    ) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryQuery:
    """A permission-bounded recall: every field is pushed down into SQL (``docs/memory.md``)."""

    tenant_id: str
    user_id: str
    domain: str | None
    task_id: str | None  # hypotheses of this task only
    max_level: DataLevel
    now: datetime
    embedding: Vector | None
    text: str
    k: int
    purpose: str | None = None  # this purpose's memories and every purpose's; None: the latter


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryFilter:
    user_id: str | None = None
    scope_level: str | None = None
    status: str | None = None
    limit: int = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryProbe:
    """A write's candidate and what the store needs to find its related records."""

    write: MemoryWrite
    memory_id: str  # the id a new record gets
    embedding: Vector | None
    actor: str  # key id, for history
    now: datetime
    embedder: str | None = None  # the embedding's provenance (app.core.embedding_space)


Gate = Callable[[Sequence[Existing]], GateDecision]
# A turn's reads of one tenant inside the block share one read-only transaction (the
# Postgres adapters' ``Database.shared_reads``): one BEGIN and COMMIT instead of one per layer.
SharedReads = Callable[[str], AbstractAsyncContextManager[None]]


class MemoryStore(Protocol):
    async def write(self, *, tenant_id: str, probe: MemoryProbe, gate: Gate
                    ) -> tuple[GateDecision, MemoryRecord | None]:
        """Under a per-scope lock: read related records, run ``gate``, apply its decision."""
        ...

    async def write_many(self, *, tenant_id: str, writes: Sequence[tuple[MemoryProbe, Gate]]
                         ) -> list[tuple[GateDecision, MemoryRecord | None]]:
        """``write`` of each, in order, in one transaction under all their scopes' locks: a
        later write sees the earlier ones (a batch dedupes and supersedes within itself)."""
        ...

    async def get(self, *, tenant_id: str, memory_id: str) -> MemoryRecord | None: ...
    async def history(self, *, tenant_id: str, memory_id: str) -> list[dict[str, Any]]: ...
    async def find(self, *, tenant_id: str, filt: MemoryFilter) -> list[MemoryRecord]: ...
    async def review(self, *, tenant_id: str, memory_id: str, approve: bool, actor: str,
                     now: datetime) -> MemoryRecord | None: ...
    async def delete(self, *, tenant_id: str, memory_id: str) -> bool: ...
    async def recall(self, *, query: MemoryQuery) -> list[MemoryHit]:
        """Vector hits (``memory_vector``) then full-text hits (``memory_fts``), each ranked
        from 1, ``query.k`` of each at most, in one round trip."""
        ...
    async def pinned(self, *, query: MemoryQuery, limit: int) -> list[MemoryRecord]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ErasureJob:
    """A durable "forget me" job; ``user_id`` is the tombstone once the job has finished."""

    tenant_id: str
    erasure_id: str
    user_id: str
    status: str  # pending | running | done | failed
    requested_by: str
    requested_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    attempts: int
    receipt: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErasureTarget:
    """What one erasure run removes: the user, the tombstone, and the ids found so far."""

    tenant_id: str
    erasure_id: str
    user_id: str
    tombstone: str
    session_ids: tuple[str, ...]
    turn_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerCount:
    found: int
    erased: int
    tables: dict[str, int]


class ErasureStore(Protocol):
    """Durable erasure jobs; ``claim`` holds a cross-process lock while a run is in progress."""

    async def create(self, *, tenant_id: str, user_id: str, requested_by: str) -> ErasureJob: ...
    async def get(self, *, tenant_id: str, erasure_id: str) -> ErasureJob | None: ...
    async def open_jobs(self) -> list[tuple[str, str]]: ...
    def claim(self, *, tenant_id: str, erasure_id: str
              ) -> AbstractAsyncContextManager[ErasureJob | None]:
        """The job, marked running, held by this worker alone for the block; None when
        another worker holds it or it is no longer open. A claim taken over meanwhile (this
        worker stalled past its lease) interrupts the block with an error."""
        ...
    async def plan(self, *, job: ErasureJob, tombstone: str) -> ErasureTarget: ...
    async def record(self, *, target: ErasureTarget, layer: str, count: LayerCount) -> None: ...
    async def postpone(self, *, job: ErasureJob, receipt: dict[str, Any]) -> None:
        """Keep the job open with this (unverified) receipt: it is run again later."""
        ...
    async def finish(self, *, job: ErasureJob, status: str, receipt: dict[str, Any],
                     tombstone: str, audit: AuditRecord) -> None: ...


IngestStatus = Literal["pending", "running", "done", "failed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestJob:
    """A document accepted for ingest off the request path (``app.service.ingest``).
    ``attempts`` counts claims; ``progress`` of ``total`` chunks are embedded in the current
    attempt (``total`` is 0 until a worker has chunked the text); ``chunks`` is the written
    version's chunk count once done; ``error`` the last failure (a pending job with an error
    is retried at ``retry_at``)."""

    tenant_id: str
    job_id: str
    doc_id: str
    version: str
    status: IngestStatus
    attempts: int
    progress: int
    total: int
    chunks: int | None
    error: str | None
    retry_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedIngest:
    """A job a worker holds for its lease, with the document it must write."""

    job: IngestJob
    document: NewDocument
    text: str


class IngestJobStore(Protocol):
    """Durable ingest jobs. A claim is a lease: a job whose worker died is claimable again
    once the lease lapses; every later write of the attempt is fenced by ``job.attempts`` and
    returns False (or does nothing) when another claim has taken the job since."""

    async def create(self, *, tenant_id: str, document: NewDocument, text: str) -> IngestJob: ...
    async def get(self, *, tenant_id: str, job_id: str, bounds: DocumentBounds | None = None
                  ) -> IngestJob | None:
        """The job; with ``bounds``, only a job whose document they cover."""
        ...
    async def open_jobs(self, *, limit: int) -> list[tuple[str, str]]:
        """(tenant_id, job_id) of jobs due now (pending, or running with a lapsed lease)."""
        ...
    async def claim(self, *, tenant_id: str, job_id: str, lease_s: float
                    ) -> ClaimedIngest | None: ...
    async def progress(self, *, job: IngestJob, done: int, total: int, lease_s: float
                       ) -> bool: ...
    async def retry(self, *, job: IngestJob, error: str, delay_s: float) -> None: ...
    async def end(self, *, job: IngestJob, chunks: int | None, error: str | None) -> None:
        """Done (``error`` None) or failed; the held document is dropped either way."""
        ...
    async def purge(self, *, older_than_s: float) -> int:
        """Delete ended jobs (every tenant's) last changed before ``older_than_s`` ago."""
        ...


class Eraser(Protocol):
    """One layer of a user's data: erase it idempotently (recording counts), or count the rest."""

    layer: str

    async def erase(self, target: ErasureTarget) -> LayerCount: ...
    async def remaining(self, target: ErasureTarget) -> int: ...


class Embedder(Protocol):
    model: str
    dim: int

    async def embed_query(self, text: str) -> list[float]: ...
    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingClaim:
    """The embedding state after a worker recorded its embedder: what NULL provenance means
    (``legacy``, set by the first claim ever) and the embedder configured before (the same
    one after the first claim, or a restart without a switch)."""

    legacy: str
    previous: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingCount:
    table: str
    tenant_id: str
    provenance: Provenance
    rows: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StaleRow:
    """A row whose vector another model made: its key (the store's own) and its text."""

    key: tuple[Any, ...]
    text: str


class EmbeddingStore(Protocol):
    """The stored vectors of every embedded table, by provenance (``app.core.embedding_space``)."""

    tables: tuple[str, ...]

    async def claim(self, *, embedder: str) -> EmbeddingClaim:
        """Record ``embedder`` as the configured one (the first claim also makes it legacy)."""
        ...
    async def configured(self) -> str | None:
        """The embedder the most recently started worker recorded."""
        ...
    def exclusive(self) -> AbstractAsyncContextManager[bool]:
        """Whether this worker holds the re-embedding (for the block), across workers and
        processes; False at once when another holds it. Should another take it over while
        the block runs (this one stalled past its lease), the block is interrupted with an
        error rather than run on beside it."""
        ...
    async def census(self, *, space: EmbeddingSpace) -> list[EmbeddingCount]:
        """Rows per table, tenant and provenance, across tenants."""
        ...
    async def stale(self, *, table: str, tenant_id: str, space: EmbeddingSpace, limit: int
                    ) -> list[StaleRow]:
        """Up to ``limit`` of the tenant's rows of ``table`` another server model embedded."""
        ...
    async def replace(self, *, table: str, tenant_id: str, space: EmbeddingSpace,
                      rows: Sequence[tuple[StaleRow, Vector]]) -> int:
        """Store each row's new vector as the current model's, unless the row changed
        meanwhile (its text, or its provenance); how many were stored."""
        ...


class TokenCounter(Protocol):
    def __call__(self, text: str) -> int: ...


class ReplayCache(Protocol):
    """A client-chosen turn_id's response, kept for a retry (bytes as answered)."""

    async def get(self, tenant_id: str, turn_id: str) -> bytes | None: ...
    async def put(self, tenant_id: str, turn_id: str, payload: bytes) -> None: ...


class PinSnapshots(Protocol):
    """A session's pinned memories, frozen at its first turn (first writer wins)."""

    async def read(self, tenant_id: str, session_id: str) -> bytes | None: ...
    async def freeze(self, tenant_id: str, session_id: str, payload: bytes) -> bytes: ...


class BundleStore(Protocol):
    """Bundle revisions (immutable), release channels, revocations and session pins."""

    async def register(self, *, tenant_id: str, revision: BundleRevision) -> BundleRevision: ...
    async def get(self, *, tenant_id: str, bundle_id: str, revision: str
                  ) -> BundleRevision | None: ...
    async def revisions(self, *, tenant_id: str, bundle_id: str) -> list[BundleRevision]: ...
    async def channel(self, *, tenant_id: str, bundle_id: str) -> Channel | None: ...
    async def set_channel(self, *, tenant_id: str, bundle_id: str, channel: Channel
                          ) -> None: ...
    async def revoke(self, *, tenant_id: str, bundle_id: str, revision: str,
                     reason: str) -> bool: ...
    async def session_state(self, *, tenant_id: str, session_id: str, bundle_id: str
                            ) -> tuple[Binding | None, bool, Channel | None]: ...
    async def bind(self, *, tenant_id: str, session_id: str, binding: Binding,
                   replace: bool) -> Binding: ...
    async def review(self, *, tenant_id: str, bundle_id: str, revision: str,
                     review: Review) -> Review: ...
    async def evaluate(self, *, tenant_id: str, bundle_id: str, revision: str,
                       evaluation: Evaluation) -> Evaluation: ...
    async def gate_record(self, *, tenant_id: str, bundle_id: str, revision: str
                          ) -> GateRecord: ...


class TenantSettingsSource(Protocol):
    """A tenant's settings as its admin set them (the defaults when never set)."""

    async def tenant_settings(self, *, tenant_id: str) -> TenantSettings: ...


# Summarizer failures: the model could not produce a usable summary; ``reason`` (a metric
# label) is ``timeout`` (no answer in time), ``unreachable`` (connection refused, reset, DNS),
# ``http_status`` (a non-2xx answer, e.g. 429 or 500) or ``bad_response`` (not JSON, truncated
# JSON, not a chat completion, empty or cut-off content). Infrastructure, not a domain error:
# every reason counts toward the session's compaction breaker, a turn keeps serving the last
# valid view, and the explicit compaction endpoint answers 503 with ``Retry-After:
# retry_after_s`` (the service sets it: the rest of the breaker's cool-down once it is open).
SummaryFailure = Literal["timeout", "unreachable", "http_status", "bad_response"]


class SummarizerError(Exception):
    type: str = "summarizer-unavailable"

    def __init__(self, message: str, *, reason: SummaryFailure = "bad_response",
                 retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.reason: SummaryFailure = reason
        self.retry_after_s = retry_after_s


# Retention (app.service.retention, docs/retention.md): what each target prunes, by the
# tables it reports. ``sessions`` removes idle sessions whole (their events cascade);
# ``knowledge`` removes superseded versions (their chunks cascade); ``replays`` clears the
# responses kept with manifests for a retried turn_id (envelope content) past the replay window.
RetentionTarget = Literal["manifests", "audit_log", "sessions", "knowledge", "replays"]


@dataclass(frozen=True, slots=True)
class PruneBatch:
    """One committed batch: rows removed per table (the target's first table is the batch's
    unit: 0 there means nothing of that age is left), and the sessions it removed, whose
    cached tails must go too."""

    rows: dict[str, int]
    session_ids: tuple[str, ...] = ()


class RetentionStore(Protocol):
    """Deletes what outlived its retention: one tenant, one short transaction per batch."""

    async def tenants(self) -> list[str]: ...
    async def count(self, *, tenant_id: str, target: RetentionTarget, older_than_days: int
                    ) -> dict[str, int]: ...
    async def prune(self, *, tenant_id: str, target: RetentionTarget, older_than_days: int,
                    max_rows: int) -> PruneBatch: ...
    def exclusive(self) -> AbstractAsyncContextManager[bool]:
        """Held for a run: True when no other process's run holds it. A run that loses it
        meanwhile (taken over after a stall) is interrupted with an error."""
        ...


class SessionCache(Protocol):
    """Forgets everything cached for one session (its tail, its pinned memory snapshot)."""

    async def drop(self, *, tenant_id: str, session_id: str) -> None: ...


class RateLimiter(Protocol):
    """Per-tenant token buckets and turn leases in a store every replica shares. Each call
    is one atomic step: concurrent replicas never both take the last token or slot."""

    async def take(self, *, tenant_id: str, key_id: str, limits: QuotaLimits
                   ) -> QuotaDecision:
        """One request's token from the tenant's bucket and the key's: both, or neither
        when either is empty (a limit of 0 is no bucket)."""
        ...

    async def lease(self, *, tenant_id: str, lease_id: str, cap: int, ttl_s: float
                    ) -> QuotaDecision:
        """One of the tenant's ``cap`` slots for a turn in flight, held until ``release``
        or, should its holder die, ``ttl_s`` from now."""
        ...

    async def release(self, *, tenant_id: str, lease_id: str) -> None: ...
