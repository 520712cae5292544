"""Wire models: strict pydantic shapes at the HTTP edge, mapped to domain values here.

Ids are restricted to a safe alphabet so they can never smuggle SQL, Redis key separators or
look-alike unicode; unknown fields are rejected so a typo is an error, not silently ignored.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.core.model import (
    Acl,
    AssertionPolicy,
    Budget,
    Constraint,
    DataLevel,
    TaskCheckpoint,
    ToolEffect,
    Trust,
    TurnRequest,
    Visibility,
)
from app.ports import NewDocument, NewEvent

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
Id = Annotated[str, Field(pattern=ID_PATTERN, examples=["sess_alice_014"])]
Text = Annotated[str, Field(max_length=200_000)]
ShortText = Annotated[str, Field(max_length=4_000)]
DataLevelName = Literal["public", "internal", "confidential", "secret"]
RoleName = Literal["runtime", "ops", "admin"]
VisibilityName = Literal["self", "tree", "agent", "all"]
EMBEDDING_DIM = 384


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


class TenantIdentityIn(Wire):
    require_assertion: bool = True
    algorithm: Literal["HS256", "RS256"]
    key: Annotated[str, Field(min_length=1, max_length=16_384,
                              description="HS256 secret or RS256 PEM public key")]
    issuer: ShortText | None = None
    audience: ShortText | None = None

    def to_domain(self) -> AssertionPolicy:
        return AssertionPolicy(require=self.require_assertion, algorithm=self.algorithm,
                               key_material=self.key, issuer=self.issuer,
                               audience=self.audience)


class KeyCreated(BaseModel):
    key_id: str
    api_key: str = Field(description="Shown once; only a hash is stored.")


# --- sessions -----------------------------------------------------------------------------

class MessageEvent(Wire):
    type: Literal["message"]
    role: Literal["user", "assistant", "system"]
    content: Text


class ToolCallEvent(Wire):
    type: Literal["tool_call"]
    call_id: Id
    name: Annotated[str, Field(min_length=1, max_length=200)]
    arguments: dict[str, Any] | list[Any] | str | None = None


class ToolResultEvent(Wire):
    type: Literal["tool_result"]
    call_id: Id
    content: Text
    is_error: bool = False


Event = Annotated[MessageEvent | ToolCallEvent | ToolResultEvent, Field(discriminator="type")]


class EventsAppend(TenantClaim):
    user_id: Id
    agent_id: Id | None = None
    parent_session_id: Id | None = None
    events: list[Event] = Field(min_length=1, max_length=500)

    def to_domain(self) -> list[NewEvent]:
        out: list[NewEvent] = []
        for e in self.events:
            if isinstance(e, MessageEvent):
                out.append(NewEvent(type="message", role=e.role, content=e.content))
            elif isinstance(e, ToolCallEvent):
                out.append(NewEvent(type="tool_call", role="assistant", call_id=e.call_id,
                                    name=e.name, arguments=e.arguments))
            else:
                out.append(NewEvent(type="tool_result", role="tool", call_id=e.call_id,
                                    content=e.content, is_error=e.is_error))
        return out


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
    expected_revision: int | None = Field(default=None, ge=0)
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


class DocumentIn(TenantClaim):
    doc_id: Id
    version: int = Field(ge=1, le=2_000_000_000)
    title: ShortText | None = None
    text: Annotated[str, Field(min_length=1, max_length=500_000)]
    domain: Id | None = None
    sensitivity: DataLevelName
    trust: Literal["reviewed", "evidence", "untrusted"]
    acl: AclIn | None
    observed_at: datetime | None = None
    expires_at: datetime | None = None
    source: ShortText | None = None

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
    version: int
    chunks: int


# --- context ------------------------------------------------------------------------------

class BudgetIn(Wire):
    max_tokens: int = Field(ge=256, le=2_000_000)
    reserve_output: int = Field(default=0, ge=0, le=2_000_000)

    @model_validator(mode="after")
    def _reserve_below_max(self) -> BudgetIn:
        if self.reserve_output >= self.max_tokens:
            raise ValueError("reserve_output must be smaller than max_tokens")
        return self


class WorkspaceIn(Wire):
    bundle_id: Id | None = None
    cwd: ShortText | None = None
    session_type: Literal["main", "subagent", "group", "cron"] = "main"


class ContextRequest(TenantClaim):
    turn_id: Id | None = None
    session_id: Id | None = None
    task_id: Id | None = None
    user_id: Id
    groups: list[Id] = Field(default_factory=list, max_length=256)
    domain: Id | None = None
    data_level: DataLevelName = "internal"
    query: Annotated[str, Field(min_length=1, max_length=32_000)]
    query_embedding: list[float] | None = Field(
        default=None, min_length=EMBEDDING_DIM, max_length=EMBEDDING_DIM)
    budget: BudgetIn
    redaction_profile: Id | None = None
    session_visibility: VisibilityName | None = Field(
        default=None, description="How far transcript search reaches; capped by the key.")
    workspace: WorkspaceIn | None = None

    def to_domain(self, *, groups: tuple[str, ...]) -> TurnRequest:
        return TurnRequest(
            turn_id=self.turn_id or f"turn_{uuid.uuid4().hex[:16]}",
            session_id=self.session_id, task_id=self.task_id, user_id=self.user_id,
            groups=groups, domain=self.domain,
            session_visibility=(Visibility.parse(self.session_visibility)
                                if self.session_visibility else None),
            data_level=DataLevel.parse(self.data_level), query=self.query,
            query_embedding=tuple(self.query_embedding) if self.query_embedding else None,
            budget=Budget(max_tokens=self.budget.max_tokens,
                          reserve_output=self.budget.reserve_output),
            redaction_profile=self.redaction_profile)


class SegmentOut(BaseModel):
    id: str
    section: Literal["stable", "session", "dynamic"]
    kind: str
    role: str
    content: str
    tokens: int
    ref: str
    trust: str


class EnvelopeOut(BaseModel):
    segments: list[SegmentOut]
    messages: list[dict[str, Any]]
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
    stable_prefix_sha256: str
    timings_ms: dict[str, float]


class ContextResponse(BaseModel):
    turn_id: str
    envelope: EnvelopeOut
    manifest: ManifestOut


class ManifestList(BaseModel):
    manifests: list[ManifestOut]
    next_before: str | None


class AuditList(BaseModel):
    records: list[dict[str, Any]]


class Problem(BaseModel):
    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None
