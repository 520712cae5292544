"""Wire shapes: what the client sends (``In`` models and events) and what it reads back.

Models the client sends forbid unknown fields, so a typo fails here and not as a 422 later.
Models it reads allow them (``extra="allow"``: kept, readable as attributes), so a newer
server that adds a field never breaks an older client. Ids are plain strings: the server
decides what it accepts (opaque, up to 256 characters).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

DataLevel = Literal["public", "internal", "confidential", "secret"]
Visibility = Literal["self", "tree", "agent", "all"]
Render = Literal["openai", "anthropic"]
Role = Literal["runtime", "ops", "admin"]
Origin = Literal["user_stated", "verified_tool_result", "reviewed_doc", "model_inference",
                 "team_decision"]
Trust = Literal["reviewed", "evidence", "untrusted"]
Purpose = Literal["support", "analysis", "execution"]
SessionType = Literal["main", "subagent", "group", "cron"]
RuntimeName = Literal["codex", "claude-code", "hermes", "openclaw"]


class In(BaseModel):
    """A request body part: unknown fields are an error; a ``None`` field is not sent (the
    server's default applies) unless it is named in ``send_none``."""

    model_config = ConfigDict(extra="forbid")
    send_none: ClassVar[frozenset[str]] = frozenset()

    def wire(self) -> dict[str, Any]:
        """The JSON body of this part."""
        out = self.model_dump(mode="json", exclude_none=True, by_alias=True)
        for name in self.send_none:
            out.setdefault(name, None)
        return out


class Out(BaseModel):
    """A response shape: fields a newer server adds are kept, never an error."""

    model_config = ConfigDict(extra="allow")


# --- events ---------------------------------------------------------------------------------

class Message(In):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system"]
    content: str


class ToolCall(In):
    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any] | list[Any] | str | None = None


class ToolResult(In):
    type: Literal["tool_result"] = "tool_result"
    call_id: str
    content: str
    is_error: bool = False


Event = Annotated[Message | ToolCall | ToolResult, Field(discriminator="type")]


class CompactionBreaker(Out):
    """A session's compaction breaker after an admin reset: ``reset`` False when it was
    closed with no failure (nothing written)."""

    session_id: str
    state: str
    previous_state: str
    previous_failures: int
    reset: bool


class EventsAppended(Out):
    session_id: str
    seqs: list[int]


class EventRecord(Out):
    seq: int
    type: str
    role: str | None = None
    content: str = ""
    call_id: str | None = None
    name: str | None = None
    arguments: Any = None
    is_error: bool = False
    created_at: datetime | None = None


class EventsPage(Out):
    session_id: str
    events: list[EventRecord]
    next_after_seq: int | None = None


class TranscriptHit(Out):
    session_id: str
    seq: int
    type: str
    role: str | None = None
    content: str
    rank: int


class TranscriptSearch(Out):
    hits: list[TranscriptHit]


class Compaction(Out):
    """A recorded compaction run: ``type`` is compaction.none | pruned | completed |
    breaker_open, ``trigger`` manual | auto."""

    type: str
    compaction_id: str
    trigger: str
    tokens_before: int
    tokens_after: int
    cut_seq: int | None = None
    summary_sha256: str | None = None
    pruned: int = 0
    attempts: int = 0
    validation: dict[str, Any] | None = None
    consecutive_failures: int = 0
    breaker_open: bool = False
    needs_human: bool = False
    previous_compaction_id: str | None = None
    checkpoint_revision_before: int | None = None
    checkpoint_revision_after: int | None = None


# --- context --------------------------------------------------------------------------------

class Budget(In):
    max_tokens: int
    reserve_output: int = 0


class Retrieval(In):
    """A turn's retrieval depth per layer (at most 100) and knowledge relevance floor (0..1);
    a field left out is sized by the budget or the server's settings."""

    knowledge_limit: int | None = None
    memory_limit: int | None = None
    session_limit: int | None = None
    min_score: float | None = None


class Workspace(In):
    bundle_id: str
    cwd: str | None = None
    session_type: SessionType | None = None
    files: list[str] | None = None
    revision: str | None = None  # pin one (served, or shadowed for this turn's cohort)


class Segment(Out):
    id: str
    section: str
    kind: str
    role: str
    content: str
    tokens: int
    ref: str
    trust: str
    quarantined: bool = False


class CacheBreakpoint(Out):
    location: Literal["system", "messages"]
    index: int


class Envelope(Out):
    segments: list[Segment]
    render: Render = "openai"
    system: list[dict[str, Any]] | None = None
    messages: list[dict[str, Any]]
    cache_breakpoint: CacheBreakpoint | None = None
    total_tokens: int
    stable_prefix_sha256: str


class Manifest(Out):
    turn_id: str
    tenant_id: str
    session_id: str | None = None
    task_id: str | None = None
    user_id: str
    created_at: str
    policy_revision: str = ""
    bundle: dict[str, Any] | None = None
    token_budget: int = 0
    reserve_output: int = 0
    total_tokens: int = 0
    redaction_profile: str | None = None
    segments: list[dict[str, Any]] = Field(default_factory=list)
    dropped: list[dict[str, Any]] = Field(default_factory=list)
    counts: dict[str, Any] = Field(default_factory=dict)
    conflicts: list[dict[str, Any]] = Field(default_factory=list)
    validation: dict[str, Any] = Field(default_factory=dict)
    compaction: dict[str, Any] | None = None
    read_back: list[dict[str, str]] = Field(default_factory=list)  # {reason, ref}
    # depths per layer, floor, and noise (retrieved_tokens, noise_tokens, noise_ratio)
    retrieval: dict[str, Any] = Field(default_factory=dict)
    stable_prefix_sha256: str = ""
    render: Render = "openai"
    degraded: list[str] = Field(default_factory=list)  # e.g. ["redis"]: answered without it
    timings_ms: dict[str, float] = Field(default_factory=dict)


class Appended(Out):
    seqs: list[int]


class ContextResponse(Out):
    turn_id: str
    envelope: Envelope
    manifest: Manifest
    appended: Appended | None = None


class ManifestList(Out):
    manifests: list[Manifest]
    next_cursor: str | None = None


class AuditList(Out):
    records: list[dict[str, Any]]


class Explanation(Out):
    """Why one source did or did not reach a turn (``GET /v1/manifests/{id}/explain``)."""

    turn_id: str
    ref: str
    outcome: Literal["included", "dropped", "not_a_candidate"]
    stage: Literal["permission", "safety", "relevance", "dedupe", "budget"] | None = None
    reason: str
    detail: dict[str, Any] = Field(default_factory=dict)
    evaluated_at: str


class Replay(Out):
    """Recorded turns assembled again under variants (``POST /v1/replays``): per turn its
    recorded shape and each variant's, with diffs; refs, tokens and hashes, never content."""

    turns: list[dict[str, Any]]
    summary: dict[str, dict[str, Any]]
    content: Literal["none"] = "none"


# --- tasks ----------------------------------------------------------------------------------

class Constraint(In):
    text: str
    kind: Literal["only", "except", "limit", "deadline", "precondition"]
    source_ref: str | None = None


class ToolEffect(In):
    effect_id: str
    idempotency_key: str
    status: str
    ref: str | None = None


class CheckpointSaved(Out):
    task_id: str
    revision: int


class Checkpoint(Out):
    task_id: str
    revision: int
    user_id: str
    session_id: str | None = None
    parent_task_id: str | None = None
    goal: str
    accepted_decisions: list[str] = Field(default_factory=list)
    verified_evidence: list[str] = Field(default_factory=list)
    open_questions: list[str] = Field(default_factory=list)
    constraints: list[dict[str, Any]] = Field(default_factory=list)
    pending_approvals: list[str] = Field(default_factory=list)
    tool_effects: list[dict[str, Any]] = Field(default_factory=list)
    next_safe_action: str = ""
    created_at: datetime | None = None


# --- knowledge ------------------------------------------------------------------------------

class Acl(In):
    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)


class Chunk(In):
    """A chunk of a document the client chunked and embedded itself (the server's
    dimension)."""

    text: str
    embedding: list[float]


class DocumentIn(In):
    """One document to ingest, as ``text`` (the server chunks and embeds it) or as
    ``chunks`` with the client's embeddings: exactly one of the two. ``acl=None`` means the
    whole tenant may read it."""

    send_none: ClassVar[frozenset[str]] = frozenset({"acl"})
    doc_id: str
    version: str | int
    text: str | None = None
    chunks: list[Chunk] | None = None
    sensitivity: DataLevel
    trust: Trust
    acl: Acl | None = None
    title: str | None = None
    domain: str | None = None
    observed_at: datetime | None = None
    expires_at: datetime | None = None
    source: str | None = None
    tenant_id: str | None = None


class DocumentIngested(Out):
    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)
    doc_id: str
    version: str
    chunks: int


class IngestJob(Out):
    """A document accepted for ingest in the background (the server answered 202): poll
    ``get_ingest_job(job_id)`` until ``status`` is ``done`` (the version is current) or
    ``failed``; ``progress`` is ``{"embedded": n, "total": m}`` chunks."""

    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)
    job_id: str
    status: str
    doc_id: str
    version: str
    attempts: int = 0
    progress: dict[str, int] = {}
    chunks: int | None = None
    error: str | None = None
    retry_at: datetime | None = None
    created_at: datetime
    updated_at: datetime


class Document(Out):
    """A stored document's metadata, by its current version (GET
    /v1/knowledge/documents[/{doc_id}]): ``version`` is the client's label, ``revision`` its
    place in ingest order, ``versions`` how many are stored; ``acl=None``: the whole
    tenant."""

    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)
    doc_id: str
    version: str
    revision: int | None = None
    versions: int | None = None
    title: str | None = None
    domain: str | None = None
    sensitivity: str | None = None
    trust: str | None = None
    acl: dict[str, list[str]] | None = None
    chunks: int | None = None
    observed_at: datetime | None = None
    expires_at: datetime | None = None
    source: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class DocumentList(Out):
    documents: list[Document]
    next_cursor: str | None = None


# --- memories -------------------------------------------------------------------------------

class MemoryScope(In):
    level: Literal["user", "team"]
    user_id: str | None = None
    domain: str | None = None


class MemoryIn(In):
    """One memory proposal for the write gate (POST /v1/memories)."""

    statement: str
    scope: MemoryScope
    origin: Origin
    source_session: str
    owner: str
    evidence_ref: str | None = None
    confidence: float | None = None
    sensitivity: DataLevel | None = None
    key: str | None = None
    expires_at: datetime | None = None
    ttl_days: int | None = None
    task_id: str | None = None
    pinned: bool | None = None
    purpose: Purpose | None = None  # omitted: every purpose
    tenant_wide: bool | None = None  # a team memory without a domain, in every domain
    embedding: list[float] | None = None
    tenant_id: str | None = None


class Memory(Out):
    memory_id: str
    version: int
    statement: str
    origin: str
    evidence_ref: str | None = None
    scope: dict[str, Any]
    owner: str
    source_session: str
    task_id: str | None = None
    confidence: float
    sensitivity: str
    status: str
    supersedes: str | None = None
    pinned: bool = False
    key: str | None = None
    observed_at: datetime | None = None
    confirmed_at: datetime | None = None
    expires_at: datetime | None = None
    purpose: str | None = None
    tenant_wide: bool = False


class MemoryDetail(Memory):
    history: list[dict[str, Any]] = Field(default_factory=list)


class MemoryDecision(Out):
    """The write gate's answer; a rejection is an answer (``decision="rejected"``), not an
    error."""

    decision: str
    type: str
    reason: str
    memory: Memory | None = None


class MemoryList(Out):
    memories: list[Memory]


# --- bundles --------------------------------------------------------------------------------

class BundleFile(In):
    path: str
    content: str


class BundleRevision(Out):
    bundle_id: str
    revision: str
    runtime: str
    sha256: str
    revoked: bool
    created_at: str | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    declared_scope: list[str] = Field(default_factory=list)
    approval: dict[str, Any] = Field(default_factory=dict)
    compatibility: dict[str, Any] = Field(default_factory=dict)
    lint: list[dict[str, Any]] = Field(default_factory=list)
    registered_by: str | None = None
    files: list[dict[str, Any]] | None = None
    review: BundleReview | None = None
    evaluations: list[BundleEvaluation] | None = None


class BundleReview(Out):
    decision: Literal["approved", "rejected"]
    reviewer: str
    note: str | None = None
    at: str | None = None


class BundleEvaluation(Out):
    suite: str
    suite_version: str
    passed: bool
    metrics: dict[str, float | None] = Field(default_factory=dict)
    against_revision: str | None = None
    report_sha256: str
    recorded_by: str
    at: str | None = None


class Channel(Out):
    stable: str | None = None
    canary: str | None = None
    canary_share: float = 0.0
    canary_agents: list[str] = Field(default_factory=list)
    shadow: str | None = None
    shadow_share: float = 0.0
    shadow_agents: list[str] = Field(default_factory=list)


class Bundle(Out):
    bundle_id: str
    revisions: list[BundleRevision]
    channel: Channel | None = None


class BundleDiff(Out):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    from_: str = Field(alias="from")
    to: str
    cwd: str = ""
    diff: str
    tokens: dict[str, int] = Field(default_factory=dict)
    resolved_order: dict[str, list[str]] = Field(default_factory=dict)


# --- erasures, admin, health ----------------------------------------------------------------

class ErasureAccepted(Out):
    erasure_id: str
    status: str


class Erasure(Out):
    erasure_id: str
    status: str
    subject: str
    requested_by: str
    requested_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    attempts: int = 0
    receipt: dict[str, Any] | None = None


class KeyCreated(Out):
    key_id: str
    api_key: str


class KeyInfo(Out):
    """A key as listed: never its secret or the secret's hash."""

    key_id: str
    tenant_id: str
    name: str
    role: Role
    max_data_level: DataLevel
    domains: list[str] | None = None  # None: every domain
    max_session_visibility: Visibility = "tree"
    created_at: datetime
    revoked_at: datetime | None = None


class KeyList(Out):
    keys: list[KeyInfo]


class Canary(Out):
    """A leakage canary: a planted string every turn's envelope is checked for."""

    canary_id: str
    tenant_id: str
    user_id: str | None = None  # None: the whole tenant may see it
    label: str
    text: str
    created_by: str
    created_at: datetime


class CanaryList(Out):
    canaries: list[Canary]


class EmbeddingCounts(Out):
    current: int
    stale: int
    client: int
    client_stale: int
    pending: int


class EmbeddingsReport(Out):
    """GET /v1/admin/embeddings: stored vectors against the configured embedder."""

    embedder: str
    legacy_embedder: str
    running: bool
    tables: dict[str, EmbeddingCounts]


class TenantSettings(Out):
    default_session_visibility: str
    bundle_release_gate: str = "lint"


class Health(Out):
    status: str


class Readiness(Out):
    """GET /readyz: ``ok`` is False (status 503) when a store is unreachable."""

    status: str
    checks: dict[str, bool] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"
