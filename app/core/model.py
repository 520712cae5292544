"""Domain values shared by every pipeline stage.

All values are frozen, slotted, keyword-only dataclasses: a stage receives values and
returns new values, never mutates its input. Nothing here imports a framework or does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum, StrEnum
from typing import Any, Literal, Self, get_args

from app.core.quotas import QuotaOverride


class OrderedLevel(IntEnum):
    """An ordered scale whose wire form is the lower-case member name."""

    @classmethod
    def parse(cls, name: str) -> Self:
        return cls[name.upper()]

    @property
    def label(self) -> str:
        return self.name.lower()


class DataLevel(OrderedLevel):
    """Data classification, lowest to highest. Comparable: ``PUBLIC < SECRET``."""

    PUBLIC = 0
    INTERNAL = 1
    CONFIDENTIAL = 2
    SECRET = 3


class Visibility(OrderedLevel):
    """How far a turn may read other sessions' content, narrowest first (OpenClaw's
    ``tools.sessions.visibility``): this session, the sessions it spawned, the same agent's
    sessions of the user, all of the user's sessions. Never another user's."""

    SELF = 0
    TREE = 1
    AGENT = 2
    ALL = 3


class Role(StrEnum):
    RUNTIME = "runtime"
    OPS = "ops"
    ADMIN = "admin"


class Trust(StrEnum):
    """How a segment may be used. Ordered from most to least authoritative in TRUST_RANK."""

    SYSTEM = "system"
    REVIEWED = "reviewed"
    CURATED = "curated"
    EVIDENCE = "evidence"
    UNTRUSTED = "untrusted"
    INFERRED = "inferred"


TRUST_RANK: dict[Trust, int] = {
    Trust.SYSTEM: 0,
    Trust.REVIEWED: 1,
    Trust.CURATED: 2,
    Trust.EVIDENCE: 3,
    Trust.UNTRUSTED: 4,
    Trust.INFERRED: 5,
}


class Section(StrEnum):
    """Envelope sections in compile order: stable prefix first so prompt caches hit."""

    STABLE = "stable"
    SESSION = "session"
    DYNAMIC = "dynamic"


SECTION_ORDER: tuple[Section, ...] = (Section.STABLE, Section.SESSION, Section.DYNAMIC)


class Rendering(StrEnum):
    """Which model API the envelope's ``system``/``messages`` are shaped for."""

    OPENAI = "openai"  # Chat Completions messages
    ANTHROPIC = "anthropic"  # Messages API: top-level system blocks, alternating turns


class Kind(StrEnum):
    INSTRUCTION = "instruction"
    MEMORY = "memory"
    TASK_STATE = "task_state"
    SESSION = "session"
    TOOL_RESULT = "tool_result"
    RETRIEVAL = "retrieval"
    QUERY = "query"


class Layer(StrEnum):
    """The memory layer a candidate was collected from."""

    TURN = "turn"
    SESSION = "session"
    TASK = "task"
    TEAM = "team"
    USER = "user"
    PROJECT = "project"  # instruction bundles
    KNOWLEDGE = "knowledge"


class DropLayer(StrEnum):
    """The stage that dropped a candidate; the manifest counts drops per layer."""

    PERMISSION = "permission"
    SAFETY = "safety"
    RELEVANCE = "relevance"
    DEDUPE = "dedupe"
    BUDGET = "budget"


@dataclass(frozen=True, slots=True, kw_only=True)
class AssertionPolicy:
    """A tenant's rule for end-user identity: ``user_id``/``groups`` from a JWT it signs."""

    require: bool
    algorithm: str  # "HS256" | "RS256"
    key_material: str  # the HS256 secret or the RS256 public key (PEM)
    issuer: str | None = None
    audience: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """The authenticated caller, resolved from the API key — never from the body."""

    key_id: str
    tenant_id: str
    role: Role
    max_data_level: DataLevel
    domains: tuple[str, ...] | None  # None: every domain of the tenant
    max_session_visibility: Visibility = Visibility.TREE
    # The tenant's default for a turn that names no visibility (``tree`` unless the tenant
    # widened it); the key's cap still bounds it.
    default_session_visibility: Visibility = Visibility.TREE
    assertion: AssertionPolicy | None = None
    # The tenant's own quotas (tenant settings), read with the key in one round trip.
    quota: QuotaOverride = field(default_factory=QuotaOverride)


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    max_tokens: int
    reserve_output: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Workspace:
    """Which instruction bundle applies, where in the repo the agent works, what session."""

    bundle_id: str
    cwd: str = ""
    session_type: str = "main"  # main | subagent | group | cron
    files: tuple[str, ...] = ()  # repo-relative files in play (path-scoped rules match them)
    # A revision the turn pins instead of the session's (an evaluation comparing revisions):
    # only one the channel serves or shadows for the turn's cohort; the session is not bound.
    revision: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRequest:
    """What the body of POST /v1/context asks for, already shape-validated at the edge."""

    turn_id: str
    # A turn_id the client chose is one it can retry with; one made by the server is not
    # (a lost response never told the client), so nothing is kept for its replay.
    client_turn_id: bool = True
    session_id: str | None
    task_id: str | None
    user_id: str
    groups: tuple[str, ...]
    domain: str | None
    data_level: DataLevel
    query: str
    query_embedding: tuple[float, ...] | None
    budget: Budget
    redaction_profile: str | None
    session_visibility: Visibility | None = None  # None: the key's cap, at most TREE
    workspace: Workspace | None = None
    agent_id: str | None = None
    render: Rendering = Rendering.OPENAI
    purpose: str | None = None  # support | analysis | execution; None: purpose-less memory only
    retrieval: RetrievalLimits | None = None  # None: every default (the budget sizes it)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalLimits:
    """A turn's own retrieval depth per layer and relevance floor; None: the server's."""

    knowledge: int | None = None
    memory: int | None = None
    session: int | None = None
    min_score: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope:
    """Identity and scope of one turn: what every guard and query is bounded by."""

    tenant_id: str
    key_id: str
    user_id: str
    groups: tuple[str, ...]
    domain: str | None
    data_level: DataLevel
    session_id: str | None
    task_id: str | None
    session_visibility: Visibility = Visibility.TREE
    purpose: str | None = None  # recall sees memories of this purpose and of every purpose


@dataclass(frozen=True, slots=True, kw_only=True)
class Acl:
    """Who may read a candidate inside its tenant. ``whole_tenant`` is the explicit null ACL."""

    whole_tenant: bool
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Freshness:
    observed_at: datetime | None = None
    expires_at: datetime | None = None
    revision: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """Something that might enter the envelope, with every label the guards need.

    A label left ``None`` is *unknown*, and the permission guard denies unknowns (fail closed).
    """

    ref: str
    kind: Kind
    layer: Layer
    section: Section
    role: str  # "system" | "user" | "assistant" | "tool"
    content: str
    tenant_id: str | None
    origin: str
    trust: Trust
    sensitivity: DataLevel | None
    acl: Acl | None
    owner_user_id: str | None = None  # for user-scoped layers (session, user memory, task)
    domain: str | None = None
    freshness: Freshness = field(default_factory=Freshness)
    tokens: int = 0
    priority: int = 50  # higher survives the budget first
    never_compress: bool = False
    scores: tuple[tuple[str, int], ...] = ()  # (ranker name, 1-based rank) pairs
    score: float = 0.0  # fused relevance, set by the relevance guard
    # Cosine similarity to the query, from a vector ranker that reported one.
    similarity: float | None = None
    # What the relevance floor judged (0..1; None: not subject to it) and whether the
    # candidate counts as noise (app.core.guards.relevance); set by the relevance guard.
    relevance: float | None = None
    weak: bool = False
    reason: str = ""
    seq: int | None = None  # position in the session, for session events
    meta: tuple[tuple[str, str], ...] = ()  # small renderer hints (e.g. call_id, tool name)
    scanned: Scanned | None = None  # findings made where the content entered

    def meta_value(self, key: str) -> str | None:
        for k, v in self.meta:
            if k == key:
                return v
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Drop:
    """One candidate the pipeline left out, and why, in machine words."""

    ref: str
    kind: Kind
    layer: DropLayer
    type: str  # e.g. "dropped.permission.acl", "dropped.budget.section_full"
    reason: str
    score: float | None = None  # a relevance drop: the candidate's relevance ...
    floor: float | None = None  # ... and the floor it fell below


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """A piece of the compiled envelope. ``candidate`` keeps the provenance for the manifest."""

    id: str
    candidate: Candidate
    content: str
    tokens: int
    content_sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    type: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    ok: bool
    attempts: int
    checks: tuple[Check, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCheckpoint:
    """Structured task state; the source of truth that compaction must never lose."""

    task_id: str
    revision: int
    user_id: str
    session_id: str | None
    parent_task_id: str | None
    goal: str
    accepted_decisions: tuple[str, ...] = ()
    verified_evidence: tuple[str, ...] = ()
    open_questions: tuple[str, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    pending_approvals: tuple[str, ...] = ()
    tool_effects: tuple[ToolEffect, ...] = ()
    next_safe_action: str = ""
    admission: Admission | None = None
    created_at: datetime | None = None
    # What the detectors found in the task state's texts as rendered when the revision was
    # written (``candidates.scan_task_state``): every worker's first turn on the task takes
    # them instead of scanning ~10 kB of task state. Not part of the checkpoint's content.
    scanned: tuple[ScannedPart, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class ScannedPart:
    """Findings of one task state text (``core``, ``detail``), by the digest of that text:
    they apply to a turn's text only when it renders the same (a constraint that expired
    since renders differently, and is scanned)."""

    part: str
    digest: str
    findings: tuple[Finding, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Admission:
    """The widest scope a task was admitted with: the writing key's caps, narrowed by the
    parent task's admission. A sub-task can never read more than its parent was allowed."""

    max_level: DataLevel
    domains: tuple[str, ...] | None  # None: every domain

    def narrow(self, other: Admission | None) -> Admission:
        if other is None:
            return self
        if self.domains is None or other.domains is None:
            domains = self.domains if other.domains is None else other.domains
        else:
            domains = tuple(sorted(set(self.domains) & set(other.domains)))
        return Admission(max_level=min(self.max_level, other.max_level), domains=domains)


@dataclass(frozen=True, slots=True, kw_only=True)
class Constraint:
    """A committed qualifier, verbatim (``app.core.compaction.qualify`` makes and reads it)."""

    text: str
    kind: str  # only | except | limit | deadline | precondition
    source_ref: str | None = None
    id: str = ""  # hash of the normalized text; conclusions cite it as [constraint:<id>]
    origin: str = ""  # user | assistant | tool | knowledge ("" : given through the API)
    due: str | None = None  # ISO date the constraint names
    expires_at: str | None = None  # ISO datetime: the end of ``due`` (UTC)
    flags: tuple[str, ...] = ()  # e.g. "date_unparsed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolEffect:
    effect_id: str
    idempotency_key: str
    status: str
    ref: str | None = None


FindingAction = Literal["drop", "mask", "quarantine"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One span a detector flagged. ``type`` is a stable machine word, e.g. ``pii.email``;
    ``action`` is the detector's proposal, which the redaction profile may override."""

    type: str
    action: FindingAction
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Scanned:
    """What the pipeline's detectors found in ``text`` where it entered (a session event as it
    entered the hot tail, a knowledge chunk at ingest). The safety guard takes these findings
    for a candidate whose content is still that very text object, and scans it otherwise: a
    stage that rewrites content cannot carry stale findings along."""

    text: str
    findings: tuple[Finding, ...]


def scanned(text: str, findings: tuple[Finding, ...] | None) -> Scanned | None:
    """``text``'s findings for a candidate to carry; None when none were made where it entered."""
    return None if findings is None else Scanned(text, findings)


def tagged_findings(findings: Sequence[Finding], fingerprint: str) -> list[Any]:
    """Findings as stored beside the text they were found in: ``[fingerprint, [[type,
    action, start, end], ...]]``, the fingerprint naming the detector code that found them."""
    return [fingerprint, [[f.type, f.action, f.start, f.end] for f in findings]]


def untag_findings(value: Any, fingerprint: str) -> tuple[Finding, ...] | None:
    """Stored findings made by the detector code ``fingerprint`` names; None (scan again) for
    another fingerprint or anything malformed."""
    rows = _untagged(value, fingerprint)
    if not isinstance(rows, list):
        return None
    out: list[Finding] = []
    for item in rows:
        if not (isinstance(item, list) and len(item) == 4 and isinstance(item[0], str)
                and item[1] in _ACTIONS and _offset(item[2]) and _offset(item[3])
                and item[2] <= item[3]):
            return None
        out.append(Finding(type=item[0], action=item[1], start=item[2], end=item[3]))
    return tuple(out)


_ACTIONS = get_args(FindingAction)


def untag_count(value: Any, tag: str) -> int | None:
    """The count of a stored ``[tag, n]`` made with ``tag`` (a tokenizer's name), else None."""
    n = _untagged(value, tag)
    return n if _offset(n) else None


def _untagged(value: Any, tag: str) -> Any:
    """The payload of a ``[tag, payload]`` pair made with ``tag``, else None."""
    if isinstance(value, list) and len(value) == 2 and value[0] == tag:
        return value[1]
    return None


def _offset(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEvent:
    """One archived event of a session, in sequence order."""

    seq: int
    type: str  # message | tool_call | tool_result
    role: str | None = None
    content: str = ""
    call_id: str | None = None
    name: str | None = None
    arguments: Any = None
    is_error: bool = False
    created_at: datetime | None = None
    # Derived once, when it entered the hot tail, from its candidate content
    # (``event_content``): its tokens under the service's tokenizer, and what the service's
    # detectors found in it. None: not known here, made when needed.
    tokens: int | None = None
    findings: tuple[Finding, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptHit:
    """An event of one of the caller's visible sessions that matched a transcript search."""

    session_id: str
    event: SessionEvent
    rank: int  # 1-based, within its ranker
    ranker: str = "fts"  # "fts" (words) | "vector" (meaning)
    similarity: float | None = None  # cosine to the query, for the vector ranker


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    tenant_id: str
    session_id: str
    user_id: str
    agent_id: str | None
    parent_session_id: str | None
    last_seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeHit:
    """A chunk returned by a store search, already filtered by the pushed-down permission."""

    chunk_ref: str  # app.core.refs.chunk_ref
    doc_id: str
    version: str  # the client's opaque version label
    chunk_no: int
    text: str
    tenant_id: str
    domain: str | None
    sensitivity: DataLevel
    trust: Trust
    acl: Acl
    observed_at: datetime | None
    expires_at: datetime | None
    rank: int  # 1-based rank within its ranker
    ranker: str  # "vector" | "fts"
    similarity: float | None = None  # the vector ranker's cosine similarity
    # Made at ingest by the service's tokenizer and detectors; None: make them when needed.
    tokens: int | None = None
    findings: tuple[Finding, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheBreakpoint:
    """Where the stable, cacheable prefix of a rendering ends: the last item of it is
    ``system[index]`` or ``messages[index]``."""

    location: Literal["system", "messages"]
    index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """The compiled turn. ``system`` is the top-level system blocks (Anthropic; None for
    OpenAI, whose system text is the first message); ``cache_breakpoint`` is None when the
    envelope has no stable prefix."""

    segments: tuple[Segment, ...]
    messages: tuple[dict[str, Any], ...]
    total_tokens: int
    stable_prefix_sha256: str
    render: Rendering = Rendering.OPENAI
    system: tuple[dict[str, Any], ...] | None = None
    cache_breakpoint: CacheBreakpoint | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Assembly:
    """Everything the pure pipeline decided for one turn."""

    envelope: Envelope
    dropped: tuple[Drop, ...]
    permission_drops: tuple[Drop, ...]  # never in the manifest: details go to audit
    candidates: int
    validation: Validation


class MemoryStatus(StrEnum):
    ACTIVE = "active"
    PENDING = "pending"
    SUPERSEDED = "superseded"
    REJECTED = "rejected"
    HYPOTHESIS = "hypothesis"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecord:
    """One long-term memory, shaped like the seeds' record (``docs/memory.md``)."""

    tenant_id: str
    memory_id: str
    version: int
    statement: str
    origin: str
    evidence_ref: str | None
    scope_level: str  # "user" | "team"
    user_id: str | None
    domain: str | None
    owner: str
    source_session: str
    task_id: str | None
    confidence: float
    sensitivity: DataLevel
    status: MemoryStatus
    supersedes: str | None
    pinned: bool
    subject_key: str | None
    observed_at: datetime
    confirmed_at: datetime
    expires_at: datetime | None
    purpose: str | None = None  # None: every purpose
    tenant_wide: bool = False  # a team memory without a domain served in every domain


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryHit:
    """A recalled memory, already filtered by the pushed-down permission."""

    record: MemoryRecord
    rank: int  # 1-based rank within its ranker
    ranker: str  # "memory_vector" | "memory_fts"
