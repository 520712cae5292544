"""Wire models: strict pydantic shapes at the HTTP edge, mapped to domain values here.

External ids are ``Id``: opaque printable Unicode, NFC-normalized (``app.core.ids``); the stores
escape them where they become key or ref segments. Unknown fields are rejected so a typo is an
error, not silently ignored.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from app.api.embeddings import Loc, Vector
from app.core.canaries import CANARY_MAX_LENGTH, CANARY_MIN_LENGTH
from app.core.ids import MAX_ID_LEN, normalize_id
from app.core.memory_gate import MemoryWrite
from app.core.model import (
    Acl,
    AssertionPolicy,
    Budget,
    Constraint,
    DataLevel,
    MemoryRecord,
    Rendering,
    RetrievalLimits,
    TaskCheckpoint,
    ToolEffect,
    Trust,
    TurnRequest,
    Visibility,
    Workspace,
)
from app.core.quotas import QuotaOverride
from app.core.registry import BundleFile, BundleRevision
from app.core.release_gate import Evaluation, ReleaseGate, Review
from app.core.retrieval import POOL_MAX
from app.ports import (
    ClientChunk,
    DocumentInfo,
    IngestJob,
    NewDocument,
    NewEvent,
    TenantSettings,
)

INT32_MAX = 2**31 - 1  # sequence numbers and revisions are PostgreSQL integers


def _no_nul(value: str) -> str:
    # PostgreSQL text and jsonb cannot hold U+0000: refuse it here as a 422, not a 500 there.
    if "\x00" in value:
        raise ValueError("text must not contain NUL (U+0000) characters")
    return value


def _no_nul_json(value: Any) -> Any:
    if isinstance(value, str):
        return _no_nul(value)
    if isinstance(value, dict):
        return {_no_nul(str(k)): _no_nul_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nul_json(v) for v in value]
    return value


def _utc_representable(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    try:
        return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    except OverflowError:
        raise ValueError("timestamps must lie before year 10000 in UTC") from None


NulFree = AfterValidator(_no_nul)
# One id type for bodies, path and query parameters (``Annotated[Id, Path()]``): the value
# is validated and replaced by its NFC form, which is what is stored and echoed.
Id = Annotated[str, AfterValidator(normalize_id), Field(
    examples=["alice@acme.com", "agent:main:discord:channel:123", "docs/payments/refund.md"],
    json_schema_extra={"minLength": 1, "maxLength": MAX_ID_LEN},
    description="1..256 printable Unicode characters, no leading/trailing whitespace; "
                "NFC-normalized")]


def _int_as_label(value: Any) -> Any:
    # Versions were integers before they became labels: an integer still reads as its digits.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


# A document version: a label of the client's (``v3``, ``6f2d1be``, ``2026.07.15.3``), held to
# the id rules; the server orders versions by their first ingest (``revision``).
DocVersion = Annotated[Id, BeforeValidator(_int_as_label), Field(
    examples=["v3", "6f2d1be", "2026.07.15.3"],
    description="the client's version label (an integer is read as its digits)")]
# Ids the server minted (keys, erasures, memories) keep their narrow shape.
MintedId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
Text = Annotated[str, Field(max_length=200_000), NulFree]
ShortText = Annotated[str, Field(max_length=4_000), NulFree]
Instant = Annotated[datetime | None, AfterValidator(_utc_representable)]
JsonValue = Annotated[Any, AfterValidator(_no_nul_json)]
Int32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
DataLevelName = Literal["public", "internal", "confidential", "secret"]
RoleName = Literal["runtime", "ops", "admin"]
VisibilityName = Literal["self", "tree", "agent", "all"]


class Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class TranscriptHitOut(BaseModel):
    session_id: str
    seq: int
    type: str
    role: str | None
    content: str
    rank: int


class TranscriptSearch(BaseModel):
    hits: list[TranscriptHitOut]


class TenantClaim(Wire):
    # The tenant always comes from the key; a body may name it only to have it checked.
    tenant_id: Id | None = Field(default=None, description="Must equal the key's tenant.")


# --- keys ---------------------------------------------------------------------------------

class KeyCreate(Wire):
    tenant_id: Id
    role: RoleName
    max_data_level: DataLevelName = "internal"
    domains: list[Id] | None = Field(default=None, max_length=64)
    max_session_visibility: VisibilityName = "tree"
    name: ShortText = ""


# --- leakage canaries (platform operator) ---------------------------------------------------

CanaryText = Annotated[str, NulFree, Field(
    min_length=CANARY_MIN_LENGTH, max_length=CANARY_MAX_LENGTH,
    pattern=r"^\S(.*\S)?$", examples=["NIGHTJAR-7731"],
    description=f"the planted string, {CANARY_MIN_LENGTH}..{CANARY_MAX_LENGTH} characters, no "
                "leading/trailing whitespace; long enough that ordinary text never holds it")]


class CanaryCreate(Wire):
    tenant_id: Id = Field(description="The tenant whose data the canary was planted in.")
    user_id: Id | None = Field(default=None, description=(
        "The user whose private data holds it: another user of the tenant seeing it is a "
        "cross_user leak. None: the whole tenant may see it."))
    label: Annotated[str, NulFree, Field(max_length=200)] = ""
    text: CanaryText


class CanaryOut(BaseModel):
    # Read from the store's ``CanaryInfo`` by attribute: the same fields, one place.
    model_config = ConfigDict(from_attributes=True)

    canary_id: str
    tenant_id: str
    user_id: str | None
    label: str
    text: str
    created_by: str
    created_at: datetime


class CanaryList(BaseModel):
    canaries: list[CanaryOut]


class TenantIdentityIn(Wire):
    require_assertion: bool = True
    algorithm: Literal["HS256", "RS256"]
    key: Annotated[str, NulFree, Field(min_length=1, max_length=16_384,
                              description="HS256 secret or RS256 PEM public key")]
    issuer: ShortText | None = None
    audience: ShortText | None = None

    def to_domain(self) -> AssertionPolicy:
        return AssertionPolicy(require=self.require_assertion, algorithm=self.algorithm,
                               key_material=self.key, issuer=self.issuer,
                               audience=self.audience)


class TenantSettingsBody(Wire):
    """A tenant's settings for all of its turns."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"default_session_visibility": "agent"}]})

    default_session_visibility: VisibilityName = Field(
        "tree", description="How far a turn that names no session_visibility reads the "
        "user's other sessions; each key's max_session_visibility still caps it. 'tree' "
        "(this session and those it spawned) is the fail-closed default: widening it to "
        "'agent' or 'all' is what lets a new session recall earlier ones.")

    # The tenant's quotas (docs/quotas.md); null: the server's CTXGATE_QUOTA_* default.
    quota_requests_per_s: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="Requests per second the tenant's "
        "bucket refills with, across every replica (0: no limit).")
    quota_requests_burst: int | None = Field(
        None, ge=1, description="How many requests the tenant's bucket holds: a burst "
        "past the rate.")
    quota_key_requests_per_s: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="Requests per second for each of the "
        "tenant's keys, inside the tenant's rate (0: no per-key limit).")
    quota_turns_concurrent: int | None = Field(
        None, ge=0, description="Turns in flight at once for the tenant, across every "
        "replica; never more than a worker's database pool less one (0: no cap).")
    bundle_release_gate: ReleaseGate = Field(
        "lint", description="What promoting a bundle revision requires (docs/bundles.md). "
        "'lint': no blocking lint finding — the default, because a single developer's "
        "runtime setup pushes and promotes from a hook with one key. 'full': that, an "
        "approval by another admin or ops key than the registering one, and a passing "
        "evaluation against the live revision — what production tenants should use.")

    def to_domain(self) -> TenantSettings:
        return TenantSettings(
            default_session_visibility=Visibility.parse(self.default_session_visibility),
            quota=QuotaOverride(
                requests_per_s=self.quota_requests_per_s,
                requests_burst=self.quota_requests_burst,
                key_requests_per_s=self.quota_key_requests_per_s,
                turns_concurrent=self.quota_turns_concurrent),
            bundle_release_gate=self.bundle_release_gate)

    @classmethod
    def of(cls, settings: TenantSettings) -> TenantSettingsBody:
        q = settings.quota
        return cls(default_session_visibility=settings.default_session_visibility.label,
                   quota_requests_per_s=q.requests_per_s,
                   quota_requests_burst=q.requests_burst,
                   quota_key_requests_per_s=q.key_requests_per_s,
                   quota_turns_concurrent=q.turns_concurrent,
                   bundle_release_gate=settings.bundle_release_gate)


class KeyCreated(BaseModel):
    key_id: str
    api_key: str = Field(description="Shown once; only a hash is stored.")


class KeyOut(BaseModel):
    """A key as listed: never its secret or the secret's hash."""

    key_id: str
    tenant_id: str
    name: str
    role: RoleName
    max_data_level: DataLevelName
    domains: list[str] | None = Field(description="null: every domain")
    max_session_visibility: VisibilityName
    created_at: datetime
    revoked_at: datetime | None


class KeyList(BaseModel):
    keys: list[KeyOut]


class EmbeddingCounts(BaseModel):
    """Rows of one embedded table across tenants, by whose vector they hold."""

    current: int = Field(description="Vectors the configured embedder made (rows stored "
                         "before provenance was recorded count as the legacy embedder's).")
    stale: int = Field(description="Vectors another server model made: out of vector search "
                       "(full-text still finds them) until the background job re-embeds them.")
    client: int = Field(description="Client-supplied vectors accepted under the configured "
                        "embedder.")
    client_stale: int = Field(description="Client-supplied vectors accepted under another "
                              "embedder: out of vector search, never re-embedded by the "
                              "server; their client must send them again.")
    pending: int = Field(description="Rows not embedded yet (session events wait for the "
                         "recall job); 0 for tables embedded on write.")


class EmbeddingsReport(BaseModel):
    """What the stored vectors are to the configured embedder, and the re-embedding job."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "embedder": "text-embedding-3-small", "legacy_embedder": "multilingual-e5-small-q4",
        "running": True,
        "tables": {
            "knowledge_chunks": {"current": 1200, "stale": 3400, "client": 0,
                                 "client_stale": 16, "pending": 0},
            "memories": {"current": 88, "stale": 0, "client": 0, "client_stale": 0,
                         "pending": 0},
            "session_events": {"current": 5100, "stale": 900, "client": 0,
                               "client_stale": 0, "pending": 3}}}]})

    embedder: str = Field(description="The configured embedder's id (its model name).")
    legacy_embedder: str = Field(description="The embedder rows without a recorded "
                                 "provenance are taken to be made by: the one configured "
                                 "when a worker first started after provenance was recorded.")
    running: bool = Field(description="This worker's re-embedding job is in flight.")
    tables: dict[str, EmbeddingCounts]


# --- sessions -----------------------------------------------------------------------------

class MessageEvent(Wire):
    type: Literal["message"]
    role: Literal["user", "assistant", "system"]
    content: Text


class ToolCallEvent(Wire):
    type: Literal["tool_call"]
    call_id: Id
    name: Annotated[str, Field(min_length=1, max_length=200), NulFree]
    arguments: Annotated[dict[str, Any] | list[Any] | str | None,
                         AfterValidator(_no_nul_json)] = None


class ToolResultEvent(Wire):
    type: Literal["tool_result"]
    call_id: Id
    content: Text
    is_error: bool = False


Event = Annotated[MessageEvent | ToolCallEvent | ToolResultEvent, Field(discriminator="type")]


def events_to_domain(events: list[MessageEvent | ToolCallEvent | ToolResultEvent]
                     ) -> list[NewEvent]:
    out: list[NewEvent] = []
    for e in events:
        if isinstance(e, MessageEvent):
            out.append(NewEvent(type="message", role=e.role, content=e.content))
        elif isinstance(e, ToolCallEvent):
            out.append(NewEvent(type="tool_call", role="assistant", call_id=e.call_id,
                                name=e.name, arguments=e.arguments))
        else:
            out.append(NewEvent(type="tool_result", role="tool", call_id=e.call_id,
                                content=e.content, is_error=e.is_error))
    return out


class EventsAppend(TenantClaim):
    user_id: Id
    agent_id: Id | None = None
    parent_session_id: Id | None = None
    events: list[Event] = Field(min_length=1, max_length=500)

    def to_domain(self) -> list[NewEvent]:
        return events_to_domain(self.events)


class CompactRequest(TenantClaim):
    user_id: Id
    task_id: Id | None = Field(
        default=None, description="The session's task: its checkpoint gets the committed facts")
    budget_tokens: int = Field(ge=1, le=10_000_000,
                               description="The token budget the compacted view must fit")


class CompactionOut(BaseModel):
    """A recorded compaction run (``CompactionOutcome.record()``): counts, hashes, lineage."""

    model_config = ConfigDict(extra="allow")
    type: str = Field(description="compaction.none | pruned | completed | breaker_open")
    compaction_id: str
    trigger: str = Field(description="manual | auto")
    tokens_before: int
    tokens_after: int
    cut_seq: int | None
    summary_sha256: str | None
    pruned: int
    attempts: int
    validation: dict[str, Any] | None
    consecutive_failures: int
    breaker_open: bool
    needs_human: bool
    previous_compaction_id: str | None
    checkpoint_revision_before: int | None
    checkpoint_revision_after: int | None


class CompactionBreakerOut(BaseModel):
    """The session's compaction breaker after an admin reset (docs/compaction.md)."""

    session_id: str
    state: Literal["closed"] = Field(description="always closed after a reset")
    previous_state: Literal["closed", "open", "half_open"]
    previous_failures: int = Field(description="consecutive failures before the reset")
    reset: bool = Field(description="false: it was closed with no failure; nothing written")


class EventsAppended(BaseModel):
    session_id: str
    seqs: list[int]


class EventOut(BaseModel):
    seq: int
    type: str
    role: str | None
    content: str
    call_id: str | None
    name: str | None
    arguments: Any
    is_error: bool
    created_at: datetime | None


class EventsPage(BaseModel):
    session_id: str
    events: list[EventOut]
    next_after_seq: int | None


# --- tasks --------------------------------------------------------------------------------

class ConstraintIn(Wire):
    text: ShortText = Field(min_length=1)
    kind: Literal["only", "except", "limit", "deadline", "precondition"]
    source_ref: ShortText | None = None


class ToolEffectIn(Wire):
    effect_id: Id
    idempotency_key: Annotated[str, Field(min_length=1, max_length=200)]
    status: Annotated[str, Field(min_length=1, max_length=64)]
    ref: ShortText | None = None


class CheckpointIn(TenantClaim):
    user_id: Id
    session_id: Id | None = None
    parent_task_id: Id | None = None
    expected_revision: Int32 | None = None
    goal: ShortText = Field(min_length=1)
    accepted_decisions: list[ShortText] = Field(default_factory=list, max_length=200)
    verified_evidence: list[ShortText] = Field(default_factory=list, max_length=200)
    open_questions: list[ShortText] = Field(default_factory=list, max_length=200)
    constraints: list[ConstraintIn] = Field(default_factory=list, max_length=200)
    pending_approvals: list[ShortText] = Field(default_factory=list, max_length=200)
    tool_effects: list[ToolEffectIn] = Field(default_factory=list, max_length=200)
    next_safe_action: ShortText = ""

    def to_domain(self, task_id: str) -> TaskCheckpoint:
        return TaskCheckpoint(
            task_id=task_id, revision=0, user_id=self.user_id, session_id=self.session_id,
            parent_task_id=self.parent_task_id, goal=self.goal,
            accepted_decisions=tuple(self.accepted_decisions),
            verified_evidence=tuple(self.verified_evidence),
            open_questions=tuple(self.open_questions),
            constraints=tuple(Constraint(text=c.text, kind=c.kind, source_ref=c.source_ref)
                              for c in self.constraints),
            pending_approvals=tuple(self.pending_approvals),
            tool_effects=tuple(ToolEffect(effect_id=t.effect_id,
                                          idempotency_key=t.idempotency_key,
                                          status=t.status, ref=t.ref)
                               for t in self.tool_effects),
            next_safe_action=self.next_safe_action,
        )


class CheckpointSaved(BaseModel):
    task_id: str
    revision: int


class CheckpointOut(BaseModel):
    task_id: str
    revision: int
    user_id: str
    session_id: str | None
    parent_task_id: str | None
    goal: str
    accepted_decisions: list[str]
    verified_evidence: list[str]
    open_questions: list[str]
    constraints: list[dict[str, Any]]
    pending_approvals: list[str]
    tool_effects: list[dict[str, Any]]
    next_safe_action: str
    created_at: datetime | None


# --- knowledge ----------------------------------------------------------------------------

class AclIn(Wire):
    users: list[Id] = Field(default_factory=list, max_length=1000)
    groups: list[Id] = Field(default_factory=list, max_length=1000)

    @model_validator(mode="after")
    def _not_empty(self) -> AclIn:
        if not self.users and not self.groups:
            raise ValueError("an ACL must name users or groups; use null for the whole tenant")
        return self


def _has_content(value: str) -> str:
    if not value.strip():
        raise ValueError("a chunk needs non-whitespace text")
    return value


class ChunkIn(Wire):
    text: Annotated[str, Field(min_length=1, max_length=32_000), NulFree,
                    AfterValidator(_has_content)]
    embedding: Vector = Field(description="this chunk's text embedded by the client's model "
                                          "(the server's dimension)")


DOCUMENT_CHARS = 500_000


class DocumentIn(TenantClaim):
    """A document as ``text`` (the server chunks and embeds it) or as ``chunks``, each with
    the client's embedding -- exactly one of the two.

    Why client chunks rather than embeddings aligned with the server's chunks: the server
    chunks by its own tokenizer's counts (320 tokens, overlap 32), which a client cannot
    reproduce, so aligned vectors would need a round trip to learn the chunks and would break
    whenever the chunker changes. With ``chunks`` each stored chunk is exactly the text the
    client embedded; the server still counts its tokens and scans it, and searches it by
    vector and full text like any chunk. The chunk texts together are bound like ``text``."""

    doc_id: Id
    version: DocVersion
    title: ShortText | None = None
    text: Annotated[str, Field(min_length=1, max_length=DOCUMENT_CHARS), NulFree] | None = None
    chunks: list[ChunkIn] | None = Field(
        default=None, min_length=1, max_length=1000,
        description="instead of text: the document pre-chunked, each chunk with its embedding")
    domain: Id | None = None
    sensitivity: DataLevelName
    trust: Literal["reviewed", "evidence", "untrusted"]
    acl: AclIn | None
    observed_at: Instant = None
    expires_at: Instant = None
    source: ShortText | None = None

    @model_validator(mode="after")
    def _text_or_chunks(self) -> DocumentIn:
        if (self.text is None) == (self.chunks is None):
            raise ValueError("give text or chunks, exactly one of the two")
        if self.chunks is not None and sum(len(c.text) for c in self.chunks) > DOCUMENT_CHARS:
            raise ValueError(f"the chunks hold more than {DOCUMENT_CHARS} characters")
        return self

    def content(self) -> str | tuple[ClientChunk, ...]:
        """``text`` for the server to chunk and embed, or the client's chunks."""
        if self.chunks is None:
            assert self.text is not None
            return self.text
        return tuple(ClientChunk(text=c.text, embedding=c.embedding) for c in self.chunks)

    def vectors(self) -> Iterator[tuple[Loc, Sequence[float]]]:
        for j, c in enumerate(self.chunks or ()):
            yield ("chunks", j, "embedding"), c.embedding

    def to_domain(self) -> NewDocument:
        acl = (Acl(whole_tenant=True) if self.acl is None
               else Acl(whole_tenant=False, users=tuple(self.acl.users),
                        groups=tuple(self.acl.groups)))
        return NewDocument(
            doc_id=self.doc_id, version=self.version, title=self.title, domain=self.domain,
            sensitivity=DataLevel.parse(self.sensitivity), trust=Trust(self.trust), acl=acl,
            observed_at=self.observed_at, expires_at=self.expires_at, source=self.source,
            chunks=())


class DocumentIngested(BaseModel):
    doc_id: str
    version: str
    chunks: int


class DocumentOut(BaseModel):
    doc_id: str
    version: str = Field(description="the current version's label")
    revision: int = Field(description="the current version's place in ingest order (1, 2, ...)")
    versions: int = Field(description="versions stored")
    title: str | None
    domain: str | None
    sensitivity: DataLevelName
    trust: str
    acl: dict[str, list[str]] | None = Field(description="null: the whole tenant")
    chunks: int = Field(description="chunks of the current version")
    observed_at: datetime | None
    expires_at: datetime | None
    source: str | None
    created_at: datetime = Field(description="ingest of the oldest stored version")
    updated_at: datetime = Field(description="ingest of the current version")

    @classmethod
    def of(cls, d: DocumentInfo) -> DocumentOut:
        return cls(
            doc_id=d.doc_id, version=d.version, revision=d.revision, versions=d.versions,
            title=d.title, domain=d.domain, sensitivity=d.sensitivity.label,
            trust=d.trust.value,
            acl=None if d.acl.whole_tenant else {"users": list(d.acl.users),
                                                 "groups": list(d.acl.groups)},
            chunks=d.chunks, observed_at=d.observed_at, expires_at=d.expires_at,
            source=d.source, created_at=d.created_at, updated_at=d.updated_at)


class DocumentList(BaseModel):
    documents: list[DocumentOut]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null: "
                                                "no more")


# --- batch writes -------------------------------------------------------------------------
# POST /v1/memories and /v1/knowledge/documents take one object, or {"items": [...]} of
# 1..BATCH_MAX of them (answered {"items": [...]} in order). The shape is told by the
# "items" key; its tag names no field and errors drop it from ``loc`` (app.api.errors), so a
# single object's errors read as before and a bad item's name its place: loc ["body",
# "items", i, ...].
BATCH_MAX = 100
SHAPE_TAGS = ("single", "batch")


def _shape(value: Any) -> str:
    single, batch = SHAPE_TAGS
    if isinstance(value, dict):
        return batch if "items" in value else single
    return batch if isinstance(value, DocumentBatchIn | MemoryBatchIn) else single


class DocumentBatchIn(Wire):
    items: list[DocumentIn] = Field(min_length=1, max_length=BATCH_MAX)


class DocumentBatchOut(BaseModel):
    items: list[DocumentIngested]


class IngestJobOut(BaseModel):
    """A document accepted for ingest in the background (``POST /v1/knowledge/documents``
    answered 202); poll ``GET /v1/knowledge/jobs/{job_id}`` until ``done`` or ``failed``."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "job_id": "9b1f0c6e2d7a4f3b8e5c1a2d3f4b5c6d", "status": "running",
        "doc_id": "docs/payments/refund.md", "version": "v3", "attempts": 1,
        "progress": {"embedded": 48, "total": 120}, "chunks": None, "error": None,
        "retry_at": None, "created_at": "2026-12-04T19:00:00Z",
        "updated_at": "2026-12-04T19:00:02Z"}]})

    job_id: str
    status: Literal["pending", "running", "done", "failed"]
    doc_id: str
    version: str = Field(description="the version label the job writes")
    attempts: int = Field(description="claims so far (a retry or a resumed job adds one)")
    progress: dict[str, int] = Field(
        description="chunks embedded so far in this attempt, of the document's total "
                    "(total 0: not chunked yet)")
    chunks: int | None = Field(description="the written version's chunks, once done")
    error: str | None = Field(description="the last attempt's failure: a pending job with an "
                              "error is retried at retry_at; a failed one is not")
    retry_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, job: IngestJob) -> IngestJobOut:
        return cls(job_id=job.job_id, status=job.status, doc_id=job.doc_id,
                   version=job.version, attempts=job.attempts,
                   progress={"embedded": job.progress, "total": job.total},
                   chunks=job.chunks, error=job.error, retry_at=job.retry_at,
                   created_at=job.created_at, updated_at=job.updated_at)


DocumentWriteIn = Annotated[
    Annotated[DocumentIn, Tag("single")] | Annotated[DocumentBatchIn, Tag("batch")],
    Discriminator(_shape)]


# --- context ------------------------------------------------------------------------------

class BudgetIn(Wire):
    max_tokens: int = Field(ge=256, le=2_000_000)
    reserve_output: int = Field(default=0, ge=0, le=2_000_000)

    @model_validator(mode="after")
    def _reserve_below_max(self) -> BudgetIn:
        if self.reserve_output >= self.max_tokens:
            raise ValueError("reserve_output must be smaller than max_tokens")
        return self


class RetrievalIn(Wire):
    """Per-layer depth (rows per ranker, and survivors of fusion) and a relevance floor for
    this turn; what is left out is sized by the budget or the server's settings."""

    knowledge_limit: int | None = Field(default=None, ge=0, le=POOL_MAX)
    memory_limit: int | None = Field(default=None, ge=0, le=POOL_MAX)
    session_limit: int | None = Field(default=None, ge=0, le=POOL_MAX)
    min_score: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="knowledge relevance floor, 0..1 (the better of query-term coverage and "
                    "rescaled similarity); weaker chunks are dropped.relevance.below_floor")

    def to_domain(self) -> RetrievalLimits:
        return RetrievalLimits(knowledge=self.knowledge_limit, memory=self.memory_limit,
                               session=self.session_limit, min_score=self.min_score)


SessionType = Literal["main", "subagent", "group", "cron"]
RuntimeName = Literal["codex", "claude-code", "hermes", "openclaw"]
RelPath = Annotated[str, Field(max_length=1024), NulFree]


class WorkspaceIn(Wire):
    bundle_id: Id
    cwd: RelPath = ""
    session_type: SessionType = "main"
    files: list[RelPath] = Field(
        default_factory=list, max_length=256,
        description="repo-relative paths the runtime has read or is editing this turn; "
                    "Claude Code's path-scoped .claude/rules (paths: globs) load when one "
                    "matches")
    revision: Id | None = Field(
        default=None, description="serve this revision instead of the session's (e.g. an "
        "evaluation comparing two): only the channel's stable or canary revision, or its "
        "shadow when this turn is in the shadow cohort (403 otherwise); the session is not "
        "bound to it")

    def to_domain(self) -> Workspace:
        return Workspace(bundle_id=self.bundle_id, cwd=self.cwd,
                         session_type=self.session_type, files=tuple(self.files),
                         revision=self.revision)


class BundleFileIn(Wire):
    path: Annotated[str, Field(min_length=1, max_length=1024), NulFree]
    content: Annotated[str, Field(max_length=1_000_000), NulFree]


class BundleIn(Wire):
    bundle_id: Id
    revision: Id
    runtime: RuntimeName
    source: dict[str, str] = Field(default_factory=dict, max_length=16,
                                   description="e.g. repo, commit")
    files: list[BundleFileIn] = Field(min_length=1, max_length=2000)
    declared_scope: list[ShortText] = Field(default_factory=list, max_length=200)
    approval: dict[str, str] = Field(default_factory=dict, max_length=16,
                                     description="owner, change_ticket, reviewed_at")
    compatibility: dict[str, Any] = Field(default_factory=dict, max_length=16,
                                          description="min_runner_policy, required_checks")

    @model_validator(mode="after")
    def _unique_paths(self) -> BundleIn:
        if len({f.path for f in self.files}) != len(self.files):
            raise ValueError("file paths must be unique")
        return self

    def to_domain(self) -> BundleRevision:
        return BundleRevision(
            bundle_id=self.bundle_id, revision=self.revision, runtime=self.runtime,
            sha256="", files=tuple(BundleFile(path=f.path, content=f.content, sha256="")
                                   for f in self.files),
            source=self.source, declared_scope=tuple(self.declared_scope),
            approval=self.approval, compatibility=self.compatibility)


class BundleRevisionOut(BaseModel):
    bundle_id: str
    revision: str
    runtime: str
    sha256: str
    revoked: bool
    created_at: str | None
    source: dict[str, Any]
    declared_scope: list[str]
    approval: dict[str, Any]
    compatibility: dict[str, Any]
    lint: list[dict[str, Any]]
    registered_by: str | None = Field(
        None, description="the key that registered it (null: registered before this was "
                          "recorded); it may not review the revision")
    files: list[dict[str, Any]] | None = None
    review: ReviewOut | None = Field(None, description="the newest review (revision GET)")
    evaluations: list[EvaluationOut] | None = Field(
        None, description="every evaluation recorded, oldest first (revision GET)")


class ReviewIn(Wire):
    note: ShortText | None = Field(default=None, examples=["ENG-4821 reviewed with secops"])


class ReviewOut(BaseModel):
    decision: Literal["approved", "rejected"]
    reviewer: str
    note: str | None
    at: str | None

    @classmethod
    def of(cls, r: Review) -> ReviewOut:
        return cls(decision=r.decision, reviewer=r.reviewer, note=r.note, at=r.at)


class EvaluationIn(Wire):
    """A suite's result for a revision, e.g. from ``ctxgate eval compare``'s report."""

    suite: Annotated[str, Field(min_length=1, max_length=200), NulFree]
    suite_version: Annotated[str, Field(min_length=1, max_length=200), NulFree]
    passed: bool
    metrics: dict[Annotated[str, Field(max_length=100)], float | None] = Field(
        default_factory=dict, max_length=64)
    against_revision: Id | None = Field(
        default=None, description="the revision it was compared with (the gate looks for "
                                  "the live one); null: run alone")
    report_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

    def to_domain(self, recorded_by: str) -> Evaluation:
        return Evaluation(suite=self.suite, suite_version=self.suite_version,
                          passed=self.passed, metrics=self.metrics,
                          against_revision=self.against_revision,
                          report_sha256=self.report_sha256, recorded_by=recorded_by)


class EvaluationOut(BaseModel):
    suite: str
    suite_version: str
    passed: bool
    metrics: dict[str, float | None]
    against_revision: str | None
    report_sha256: str
    recorded_by: str
    at: str | None

    @classmethod
    def of(cls, e: Evaluation) -> EvaluationOut:
        return cls(suite=e.suite, suite_version=e.suite_version, passed=e.passed,
                   metrics=dict(e.metrics), against_revision=e.against_revision,
                   report_sha256=e.report_sha256, recorded_by=e.recorded_by, at=e.at)


class ChannelOut(BaseModel):
    stable: str | None
    canary: str | None
    canary_share: float
    canary_agents: list[str]
    shadow: str | None = None
    shadow_share: float = 0.0
    shadow_agents: list[str] = Field(default_factory=list)


class BundleOut(BaseModel):
    bundle_id: str
    revisions: list[BundleRevisionOut]
    channel: ChannelOut | None


class CohortIn(Wire):
    share: float = Field(default=0.0, ge=0.0, le=1.0)
    agents: list[Id] = Field(default_factory=list, max_length=200)


class PromoteIn(Wire):
    revision: Id
    cohort: CohortIn | None = Field(
        default=None, description="a canary cohort; omit for a full rollout")
    override_reason: ShortText | None = Field(
        default=None, min_length=1,
        description="promote despite what the tenant's bundle_release_gate requires and "
                    "the revision lacks: blocking lint findings (injection, remote scripts, "
                    "approval waivers, secrets), an approval, a passing evaluation against "
                    "the live revision; written to the audit log as "
                    "bundle.promote_override. Without it such a revision is refused with 409 "
                    "bundle-lint-blocked, bundle-not-approved, bundle-eval-missing or "
                    "bundle-eval-failed.",
        examples=["ENG-4821: the curl line installs our own signed CLI; reviewed by secops"])


class ShadowIn(Wire):
    revision: Id | None = Field(
        description="resolved beside the served revision on the cohort's turns and recorded "
                    "in their manifests, never served; null ends the shadow")
    cohort: CohortIn = Field(default_factory=CohortIn)


class RevokeIn(Wire):
    reason: ShortText = Field(min_length=1)


class BundleDiff(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    from_: str = Field(alias="from")
    to: str
    cwd: str
    diff: str
    tokens: dict[str, int]
    resolved_order: dict[str, list[str]]


class ContextRequest(TenantClaim):
    turn_id: Id | None = None
    session_id: Id | None = None
    task_id: Id | None = None
    user_id: Id
    groups: list[Id] = Field(default_factory=list, max_length=256)
    domain: Id | None = None
    data_level: DataLevelName = "internal"
    query: Annotated[str, Field(min_length=1, max_length=32_000), NulFree]
    query_embedding: Vector | None = Field(
        default=None, description="the query embedded by the client's model (the server's "
                                  "dimension); the embedder is then not called")
    budget: BudgetIn
    retrieval: RetrievalIn | None = None
    redaction_profile: Id | None = None
    session_visibility: VisibilityName | None = Field(
        default=None, description="How far transcript search reaches; capped by the key.")
    workspace: WorkspaceIn | None = None
    agent_id: Id | None = Field(default=None, description="for canary cohorts of named agents")
    purpose: PurposeName | None = Field(
        default=None, description="recall memories written for this purpose and for every "
                                  "purpose; omitted: purpose-less memories only")
    render: Literal["openai", "anthropic"] = Field(
        default="openai",
        description="The model API the envelope's system and messages are shaped for: openai "
                    "(Chat Completions messages) or anthropic (Messages API system + messages).")
    append_events: list[Event] | None = Field(
        default=None, min_length=1, max_length=500,
        description="Events to append to session_id (shapes as POST /v1/sessions/{id}/events) "
                    "before the turn is assembled; once per client turn_id, a retry appends "
                    "nothing new. Requires session_id.")
    parent_session_id: Id | None = Field(
        default=None, description="with append_events: the parent of a session they create "
                                  "(as POST /v1/sessions/{id}/events; agent_id too); ignored "
                                  "for a session that exists")

    @model_validator(mode="after")
    def _append_needs_session(self) -> ContextRequest:
        if self.append_events is not None and self.session_id is None:
            raise ValueError("append_events needs a session_id")
        if self.parent_session_id is not None and self.append_events is None:
            raise ValueError("parent_session_id applies to a session append_events creates")
        return self

    def vectors(self) -> Iterator[tuple[Loc, Sequence[float]]]:
        if self.query_embedding is not None:
            yield ("query_embedding",), self.query_embedding

    def appended_events(self) -> list[NewEvent]:
        return events_to_domain(self.append_events or [])

    def to_domain(self, *, groups: tuple[str, ...]) -> TurnRequest:
        return TurnRequest(
            turn_id=self.turn_id or f"turn_{uuid.uuid4().hex[:16]}",
            client_turn_id=self.turn_id is not None,
            session_id=self.session_id, task_id=self.task_id, user_id=self.user_id,
            groups=groups, domain=self.domain,
            session_visibility=(Visibility.parse(self.session_visibility)
                                if self.session_visibility else None),
            data_level=DataLevel.parse(self.data_level), query=self.query,
            query_embedding=tuple(self.query_embedding) if self.query_embedding else None,
            budget=Budget(max_tokens=self.budget.max_tokens,
                          reserve_output=self.budget.reserve_output),
            redaction_profile=self.redaction_profile,
            workspace=self.workspace.to_domain() if self.workspace else None,
            agent_id=self.agent_id, render=Rendering(self.render), purpose=self.purpose,
            retrieval=self.retrieval.to_domain() if self.retrieval else None)


class SegmentOut(BaseModel):
    id: str
    section: Literal["stable", "session", "dynamic"]
    kind: str
    role: str
    content: str
    tokens: int
    ref: str
    trust: str
    quarantined: bool = Field(
        default=False, description="the safety guard found an injection attempt in it: it is "
                                   "fenced as data with quarantined=\"true\"")


class CacheBreakpointOut(BaseModel):
    location: Literal["system", "messages"]
    index: int = Field(description="the last system block or message of the stable prefix")


class EnvelopeOut(BaseModel):
    segments: list[SegmentOut]
    render: Literal["openai", "anthropic"] = Field(
        description="the model API system and messages are shaped for (the request's render)")
    system: list[dict[str, Any]] | None = Field(
        description="anthropic: the top-level system text blocks, the last stable one with "
                    "cache_control (empty: leave system out); openai: null, the system text is "
                    "the first message")
    messages: list[dict[str, Any]] = Field(
        description="openai: chat messages (one leading system message, no other); anthropic: "
                    "alternating user/assistant messages of content blocks, starting with user")
    cache_breakpoint: CacheBreakpointOut | None = Field(
        description="where the stable, cacheable prefix ends; null without a stable section")
    total_tokens: int
    stable_prefix_sha256: str


class ManifestOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    turn_id: str
    tenant_id: str
    session_id: str | None
    task_id: str | None
    user_id: str
    created_at: str
    policy_revision: str
    bundle: dict[str, Any] | None
    token_budget: int
    reserve_output: int
    total_tokens: int
    redaction_profile: str | None
    segments: list[dict[str, Any]]
    dropped: list[dict[str, Any]]
    counts: dict[str, Any]
    conflicts: list[dict[str, Any]] = Field(
        default_factory=list, description="instruction_conflict records: higher trust wins")
    validation: dict[str, Any]
    compaction: dict[str, Any] | None = Field(
        default=None, description="the session compaction serving this turn (its record; "
                                  "reused=true when an earlier run's view was served again), "
                                  "or null when the history fit uncompacted")
    read_back: list[dict[str, str]] = Field(
        default_factory=list, description="out-of-window content this turn brought back, "
        "each {reason, ref}: read_back.missing_evidence (a committed constraint's or "
        "evidence's source not in the window), read_back.cited_conclusion (the query cites "
        "an archived event), read_back.approval_reactivated (a pending approval taken up "
        "again)")
    retrieval: dict[str, Any] = Field(
        default_factory=dict, description="this turn's depth per layer (knowledge, memory, "
        "session), relevance floor, and noise: noise_tokens (admitted retrieved tokens the "
        "floor barely passed, or sharing no query term with low similarity) over "
        "retrieved_tokens, as noise_ratio")
    stable_prefix_sha256: str
    render: Literal["openai", "anthropic"] = Field(
        default="openai", description="the rendering of the turn's envelope (manifests "
                                      "written before it was recorded: openai)")
    degraded: list[str] = Field(
        default_factory=list, description="optional dependencies this turn went without and "
        "still answered: 'redis' (the session tail was read from the archive; no replay "
        "entry or pin snapshot was kept). Empty when nothing was degraded.")
    timings_ms: dict[str, float]


class AppendedOut(BaseModel):
    seqs: list[int] = Field(description="the sequence numbers append_events got (a retried "
                                        "turn_id answers the first attempt's)")


class ContextResponse(BaseModel):
    turn_id: str
    envelope: EnvelopeOut
    manifest: ManifestOut
    appended: AppendedOut | None = Field(
        default=None, description="present when the request carried append_events")


class ManifestList(BaseModel):
    manifests: list[ManifestOut]
    next_cursor: str | None = Field(
        description="Pass as ``cursor`` for the next page (opaque); null on the last page.")


class AuditList(BaseModel):
    records: list[dict[str, Any]]


class Problem(BaseModel):
    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None
    request_id: str | None = Field(
        default=None, description="The request's id, as in its X-Request-ID response header "
        "and the server's log lines (docs/observability.md).")


# --- memories -----------------------------------------------------------------------------

OriginName = Literal["user_stated", "verified_tool_result", "reviewed_doc", "model_inference",
                     "team_decision"]
PurposeName = Literal["support", "analysis", "execution"]


class MemoryScopeIn(Wire):
    level: Literal["user", "team"]
    user_id: Id | None = None
    domain: Id | None = None


class MemoryIn(TenantClaim):
    statement: Annotated[str, Field(min_length=1, max_length=4_000), NulFree]
    scope: MemoryScopeIn
    origin: OriginName
    evidence_ref: ShortText | None = None
    source_session: Id
    owner: Id
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    sensitivity: DataLevelName = "internal"
    key: Id | None = Field(
        default=None, description="the subject: a new statement under the same key supersedes")
    expires_at: Instant = None
    ttl_days: int | None = Field(default=None, ge=1, le=3650)
    task_id: Id | None = None
    pinned: bool = Field(default=False, description="user_stated user preferences only")
    purpose: PurposeName | None = Field(
        default=None, description="what the memory is for; recall with a purpose sees it and "
                                  "purpose-less memories only. Omitted: every purpose")
    tenant_wide: bool = Field(
        default=False, description="a team memory without a domain, served in every domain "
                                   "(unmarked: only to turns without a domain)")
    embedding: Vector | None = Field(
        default=None, description="the statement embedded by the client's model (the "
                                  "server's dimension); the embedder is then not called")

    def vectors(self) -> Iterator[tuple[Loc, Sequence[float]]]:
        if self.embedding is not None:
            yield ("embedding",), self.embedding

    @model_validator(mode="after")
    def _consistent(self) -> MemoryIn:
        if self.expires_at is not None and self.ttl_days is not None:
            raise ValueError("give expires_at or ttl_days, not both")
        if self.pinned and (self.scope.level != "user" or self.origin != "user_stated"):
            raise ValueError("only user_stated user memories may be pinned")
        if self.tenant_wide and (self.scope.level != "team" or self.scope.domain is not None):
            raise ValueError("tenant_wide marks a team memory without a domain")
        return self

    def to_domain(self, now: datetime) -> MemoryWrite:
        expires = self.expires_at
        if self.ttl_days is not None:
            expires = now + timedelta(days=self.ttl_days)
        return MemoryWrite(
            statement=self.statement, scope_level=self.scope.level,
            user_id=self.scope.user_id if self.scope.level == "user" else None,
            domain=self.scope.domain, origin=self.origin, evidence_ref=self.evidence_ref,
            source_session=self.source_session, owner=self.owner, confidence=self.confidence,
            sensitivity=DataLevel.parse(self.sensitivity), key=self.key, expires_at=expires,
            task_id=self.task_id, pinned=self.pinned, purpose=self.purpose,
            tenant_wide=self.tenant_wide)


class MemoryOut(BaseModel):
    memory_id: str
    version: int
    statement: str
    origin: str
    evidence_ref: str | None
    scope: dict[str, Any]
    owner: str
    source_session: str
    task_id: str | None
    confidence: float
    sensitivity: str
    status: str
    supersedes: str | None
    pinned: bool
    key: str | None
    observed_at: datetime
    confirmed_at: datetime
    expires_at: datetime | None
    purpose: str | None = None
    tenant_wide: bool = False

    @classmethod
    def of(cls, r: MemoryRecord) -> MemoryOut:
        return cls(
            memory_id=r.memory_id, version=r.version, statement=r.statement, origin=r.origin,
            evidence_ref=r.evidence_ref,
            scope={"level": r.scope_level, "user_id": r.user_id, "domain": r.domain},
            owner=r.owner, source_session=r.source_session, task_id=r.task_id,
            confidence=r.confidence, sensitivity=r.sensitivity.label, status=r.status.value,
            supersedes=r.supersedes, pinned=r.pinned, key=r.subject_key,
            observed_at=r.observed_at, confirmed_at=r.confirmed_at, expires_at=r.expires_at,
            purpose=r.purpose, tenant_wide=r.tenant_wide)


class MemoryDecisionOut(BaseModel):
    decision: Literal["accepted", "duplicate", "superseded", "pending", "rejected", "hypothesis"]
    type: str = Field(description="stable machine word, e.g. memory.secret")
    reason: str
    memory: MemoryOut | None


class MemoryDetail(MemoryOut):
    history: list[dict[str, Any]]


class MemoryBatchIn(Wire):
    items: list[MemoryIn] = Field(min_length=1, max_length=BATCH_MAX)


class MemoryBatchOut(BaseModel):
    items: list[MemoryDecisionOut]


MemoryWriteIn = Annotated[
    Annotated[MemoryIn, Tag("single")] | Annotated[MemoryBatchIn, Tag("batch")],
    Discriminator(_shape)]


class MemoryList(BaseModel):
    memories: list[MemoryOut]


# --- erasures ("forget me") ---------------------------------------------------------------


class ErasureIn(Wire):
    user_id: Id = Field(description="The end user of the key's tenant to erase.")
    reason: str | None = Field(default=None, max_length=500,
                               description="Free text for the operator; not stored.")


class ErasureAccepted(BaseModel):
    erasure_id: str
    status: str = Field(description="pending | running | done | failed")


class ErasureOut(BaseModel):
    erasure_id: str
    status: str = Field(description="pending | running | done | failed")
    subject: str = Field(description="The user's tombstone (erased:<sha256(tenant|user)[:12]>).")
    requested_by: str
    requested_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    attempts: int
    receipt: dict[str, Any] | None = Field(
        description="Per layer found / erased / verified_remaining / status (verified, "
                    "remaining, unreachable with its error), and what is retained. An open job "
                    "shows its last attempt's checks with verified false (it is retried); "
                    "null before the first attempt.")
