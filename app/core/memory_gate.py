"""The long-term memory write gate: should this candidate become a memory, and how?

Contract: ``decide(write, existing=..., secret_detectors=..., pii_detectors=...,
injection_detectors=..., suspect_detectors=..., terms=...)`` is pure (no I/O, no clock): the
store passes in the live records of the same scope (each with its cosine ``similarity`` to the
candidate, when embeddings exist). It returns a ``GateDecision`` whose ``type`` is stable.
``terms`` is ``statement_terms`` or a memo of it: a batch meets the same related records in
every write, and analysing each statement once per batch instead of once per write took the
gate from ~4 ms to ~0.3 ms a write (100 writes against 50 records). Steps run in this order; the
first that decides wins:

1. labels          ``memory.missing_label``         owner, source_session; user scope: user_id
2. classification  ``memory.sensitivity_secret``    sensitivity ``secret`` is never stored
                   ``memory.secret``                a secret detector fired (the text is never
                   ``memory.personal_data``         stored, not even in history)
                   ``memory.injection``             an injection detector fired: a statement
                                                    that gives the model orders ("ignore previous
                                                    instructions", "note to the AI: …") is
                                                    recalled later as a trusted fact, which is
                                                    how memory poisoning persists across sessions
                   ``memory.transcript``            a pasted chat transcript: turn markers
                                                    of two speakers (User:/Assistant:/用户：...),
                                                    or more than MAX_LINES non-empty lines
                   ``memory.log``                   a pasted log: a line that is a timestamp
                                                    followed by a log level
                   ``memory.temporary``             temporary paths, one-off debug output
                                                    (stack traces included)
                   ``memory.inference_without_task`` ``model_inference`` needs a ``task_id``
3. suspicion       ``memory.injection_suspected``   a ``suspect_detectors`` finding (the learned
                                                    injection model, which scores how much a
                                                    statement reads like orders to the model,
                                                    not a rule that names an attack): held as
                                                    a ``hypothesis`` (recalled only inside its
                                                    task, as inferred content, which the
                                                    safety guard fences; none: never), so a
                                                    false alarm costs a fact's authority, not
                                                    the statement
4. dedupe          ``memory.duplicate``             same normalized statement in the scope, or
                                                    cosine >= NEAR_DUPLICATE with the same
                                                    value tokens (numbers, versions)
5. contradiction   ``memory.superseded``            same ``key`` with another statement, or
                                                    (no key) subject terms overlapping by
                                                    >= SUBJECT_OVERLAP with different values
6. approval        ``memory.pending_approval``      team scope waits for an admin
                   ``memory.missing_evidence``      evidence-backed origins need evidence_ref
                   ``memory.accepted``              user scope, user_stated or with evidence
                   ``memory.hypothesis``            model_inference, bound to its task
                   ``memory.low_confidence``        confidence < LOW_CONFIDENCE: stored as a
                                                    ``hypothesis`` (recalled only inside its
                                                    task, never as a fact; none: never)

A tentative write (model inference or low confidence) only meets hypotheses of its own task
and never supersedes a fact. ``purpose`` and ``tenant_wide`` are labels the store keeps and
recall filters on (``docs/memory.md``); the gate does not judge them.

Why the numbers: multilingual-e5-small scores paraphrases 0.93-0.99 but ALSO "Redis 6" vs
"Redis 7" at 0.987 and unrelated statements ~0.79 (docs/memory.md). Cosine alone therefore
cannot tell a duplicate from a contradiction, so a near-duplicate must carry the same value
tokens, and differing values on the same subject are a contradiction. 0.96 keeps "Tuesdays" vs
"Thursdays" (0.953) apart; a missed paraphrase costs one extra row, a false duplicate a fact.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from app.core import fts
from app.core.guards.safety import Detector
from app.core.model import DataLevel, MemoryRecord, MemoryStatus

ORIGINS = frozenset({"user_stated", "verified_tool_result", "reviewed_doc", "model_inference",
                     "team_decision"})
EVIDENCE_ORIGINS = frozenset({"verified_tool_result", "reviewed_doc", "team_decision"})
NEAR_DUPLICATE = 0.96
SUBJECT_OVERLAP = 0.75

_TEMP_PATH = re.compile(
    r"(?:^|[\s'\"(=:])(?:/tmp/|/var/tmp/|/var/folders/|/private/var/folders/|/dev/shm/"
    r"|~/Downloads\b|/Users/[^/\s]+/Downloads\b|/home/[^/\s]+/Downloads\b"
    r"|[A-Za-z]:\\(?:Windows\\)?Temp\b|%TEMP%|%TMP%|\\AppData\\Local\\Temp\b|\$TMPDIR"
    r"|(?:\./)?(?:build|dist|target|out|bin/Debug|bin/Release|obj|node_modules/\.cache"
    r"|__pycache__|\.pytest_cache)/[\w.-]+/?)", re.IGNORECASE)
_DEBUG = re.compile(
    r"Traceback \(most recent call last\)|^\s*at [\w.$<>]+\([\w.]*:\d+\)|File \"[^\"]+\", line \d+"
    r"|(?<![A-Za-z])\[?DEBUG\]?[:\]]|goroutine \d+ \[running\]|^panic: |Exception in thread \""
    r"|(?:^|\n)[0-9a-fA-F]{8}:?(?: +[0-9a-fA-F]{2,4}){8,}|(?:\\x[0-9a-fA-F]{2}){8,}|core dumped",
    re.MULTILINE)  # case-sensitive: "DEBUG:" is a log level, "a debug build" is prose
# Credentials written as prose ("the password is hunter2") that no token detector knows.
_CREDENTIAL = re.compile(
    r"\b(?:password|passwd|passphrase|api[ _-]?key|secret|token)\s*(?:is|=|:)\s*"
    r"(?=\S{4})\S*[^\sA-Za-z]"
    r"|(?:密码|口令|令牌|密钥)\s*(?:是|为|=|:|：)\s*(?=\S{4})\S*[^\sA-Za-z]", re.IGNORECASE)
_LOG_LINE = re.compile(r"^\s*\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d")
LONG_LOG_LINE = 200
# A log line: a timestamp (ISO date-time or a bare clock time) then, within its brackets,
# a level word. "Since 2026-01-02 the ERROR rate pages on-call" is prose: no clock time.
_LOG_ENTRY = re.compile(
    r"^\s*[\[(]?(?:\d{4}-\d\d-\d\d[T ])?\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"[\])]?\s*[\[(]?\s*(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|FATAL|CRITICAL|SEVERE)\b",
    re.MULTILINE | re.IGNORECASE)
_TURN_MARKER = re.compile(
    r"^\s*(?:\[[^\]\n]{1,30}\]\s*)?(user|assistant|human|ai|bot|agent|customer|"
    r"用户|助手|客服|客户)\s*[:：]", re.MULTILINE | re.IGNORECASE)
MAX_LINES = 10  # a memory is one statement (a short list at most), not a pasted text
LOW_CONFIDENCE = 0.5  # below: held as a hypothesis; the API's default confidence is 0.5
PURPOSES = frozenset({"support", "analysis", "execution"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryWrite:
    """A candidate memory, shape-checked at the edge; the tenant comes from the key."""

    statement: str
    scope_level: str  # "user" | "team"
    user_id: str | None
    domain: str | None
    origin: str
    evidence_ref: str | None
    source_session: str
    owner: str
    confidence: float
    sensitivity: DataLevel
    key: str | None
    expires_at: datetime | None
    task_id: str | None
    pinned: bool = False
    purpose: str | None = None  # one of PURPOSES; None: for every purpose
    tenant_wide: bool = False  # team memory without a domain, served in every domain


@dataclass(frozen=True, slots=True, kw_only=True)
class Existing:
    record: MemoryRecord
    similarity: float | None  # cosine to the candidate; None without embeddings


@dataclass(frozen=True, slots=True, kw_only=True)
class GateDecision:
    decision: str  # accepted | duplicate | superseded | pending | rejected | hypothesis
    type: str
    reason: str
    status: MemoryStatus | None = None  # the status to store a new record with
    target: MemoryRecord | None = None  # the duplicate confirmed, or the record superseded


def normalize(statement: str) -> str:
    """Casefold, full-width to half-width (NFKC), punctuation dropped, whitespace collapsed.

    >>> normalize("  Redis\u3000７，please! ")
    'redis 7 please'
    """
    text = unicodedata.normalize("NFKC", statement).casefold()
    text = "".join(" " if unicodedata.category(ch)[0] in "PSZ" else ch for ch in text)
    return " ".join(text.split())


def norm_sha256(statement: str) -> str:
    return hashlib.sha256(normalize(statement).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Terms:
    """What the gate compares of a statement: its normalized form, its subject terms and its
    value terms (those holding a digit: versions, sizes, dates)."""

    norm: str
    subject: frozenset[str]
    values: frozenset[str]


def statement_terms(statement: str) -> Terms:
    norm = normalize(statement)
    terms = fts.query_terms(norm)
    values = frozenset(t for t in terms if any(ch.isdigit() for ch in t))
    return Terms(norm=norm, subject=frozenset(terms) - values, values=values)


TermsOf = Callable[[str], Terms]


def _reject(type_: str, reason: str) -> GateDecision:
    return GateDecision(decision="rejected", type=f"memory.{type_}", reason=reason)


def _labels(w: MemoryWrite) -> GateDecision | None:
    missing = [name for name, value in (("owner", w.owner), ("source_session", w.source_session))
               if not value.strip()]
    if w.scope_level not in ("user", "team"):
        missing.append("scope")
    if w.scope_level == "user" and not w.user_id:
        missing.append("scope.user_id")
    return _reject("missing_label", f"missing labels: {', '.join(missing)}") if missing else None


def is_temporary(statement: str) -> bool:
    if _TEMP_PATH.search(statement) or _DEBUG.search(statement):
        return True
    return any(len(line) > LONG_LOG_LINE and _LOG_LINE.match(line)
               for line in statement.splitlines())


def pasted_shape(statement: str) -> GateDecision | None:
    """``memory.transcript`` or ``memory.log`` when the statement is a pasted conversation
    or log rather than a fact; None otherwise."""
    speakers = {m.casefold() for m in _TURN_MARKER.findall(statement)}
    if len(speakers) >= 2:  # two parties taking turns; "Agent: v7" alone is a label
        return _reject("transcript", f"a chat transcript (turns of {len(speakers)} speakers),"
                                     " not a fact")
    lines = sum(1 for line in statement.splitlines() if line.strip())
    if lines > MAX_LINES:
        return _reject("transcript", f"{lines} lines of pasted text, not one statement "
                                     f"(at most {MAX_LINES})")
    if _LOG_ENTRY.search(statement):
        return _reject("log", "a log line (timestamp and level), not a fact")
    return None


def tentative(w: MemoryWrite) -> bool:
    """A model's guess or a low-confidence statement: kept as a hypothesis only."""
    return w.origin == "model_inference" or w.confidence < LOW_CONFIDENCE


def _classify(w: MemoryWrite, secret: Sequence[Detector], pii: Sequence[Detector],
              injection: Sequence[Detector]) -> GateDecision | None:
    if w.origin not in ORIGINS:
        return _reject("unknown_origin", f"origin {w.origin!r} is not one of {sorted(ORIGINS)}")
    if w.sensitivity >= DataLevel.SECRET:
        return _reject("sensitivity_secret", "secret content is never stored as memory")
    for family, detectors in (("secret", secret), ("personal_data", pii),
                              ("injection", injection)):
        found = sorted({f.type for d in detectors for f in d(w.statement)})
        if found:  # the reason names finding types only, never the text
            return _reject(family, f"detector found {', '.join(found)}")
    if _CREDENTIAL.search(w.statement):
        return _reject("secret", "a credential written as prose (password/token is ...)")
    if w.purpose is not None and w.purpose not in PURPOSES:
        return _reject("unknown_purpose", f"purpose {w.purpose!r} is not one of "
                                          f"{sorted(PURPOSES)}")
    if is_temporary(w.statement):
        return _reject("temporary", "temporary path or one-off debug output")
    pasted = pasted_shape(w.statement)  # after temporary: its long log lines keep that type
    if pasted is not None:
        return pasted
    if w.origin == "model_inference" and not w.task_id:
        return _reject("inference_without_task", "a model inference is kept only as a "
                       "hypothesis of its task; task_id is required")
    return None


def _suspected(w: MemoryWrite, suspect: Sequence[Detector]) -> GateDecision | None:
    found = sorted({f.type for d in suspect for f in d(w.statement)})
    if not found:
        return None
    where = f"of task {w.task_id}" if w.task_id else "without a task (never recalled)"
    return GateDecision(decision="hypothesis", type="memory.injection_suspected",
                        reason=f"detector found {', '.join(found)}: held as a hypothesis "
                               f"{where}", status=MemoryStatus.HYPOTHESIS)


def _comparable(w: MemoryWrite, r: MemoryRecord) -> bool:
    if tentative(w):  # hypotheses only meet hypotheses of the same task
        return r.status is MemoryStatus.HYPOTHESIS and r.task_id == w.task_id
    return r.status in (MemoryStatus.ACTIVE, MemoryStatus.PENDING)


def _duplicate(w: MemoryWrite, existing: Sequence[Existing], terms: TermsOf
               ) -> GateDecision | None:
    mine = terms(w.statement)
    for e in existing:
        if not _comparable(w, e.record):
            continue
        theirs = terms(e.record.statement)
        same = theirs.norm == mine.norm
        near = (e.similarity is not None and e.similarity >= NEAR_DUPLICATE
                and theirs.values == mine.values)
        if same or near:
            how = "same statement" if same else f"near-duplicate (cosine {e.similarity:.3f})"
            return GateDecision(decision="duplicate", type="memory.duplicate",
                                reason=f"{how} as {e.record.memory_id}", target=e.record)
    return None


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _contradicted(w: MemoryWrite, existing: Sequence[Existing], terms: TermsOf
                  ) -> MemoryRecord | None:
    if tentative(w):
        return None  # a guess never overrides a fact
    mine = terms(w.statement)
    for e in existing:
        r = e.record
        if r.status is not MemoryStatus.ACTIVE:
            continue
        if w.key is not None and r.subject_key == w.key:
            return r
        if w.key is None and mine.values:
            theirs = terms(r.statement)
            if (theirs.values and theirs.values != mine.values
                    and _overlap(mine.subject, theirs.subject) >= SUBJECT_OVERLAP):
                return r
    return None


def _approval(w: MemoryWrite) -> GateDecision:
    if w.origin == "model_inference":
        return GateDecision(decision="hypothesis", type="memory.hypothesis",
                            reason=f"kept as a hypothesis of task {w.task_id}",
                            status=MemoryStatus.HYPOTHESIS)
    if w.confidence < LOW_CONFIDENCE:
        where = f"of task {w.task_id}" if w.task_id else "without a task (never recalled)"
        return GateDecision(decision="hypothesis", type="memory.low_confidence",
                            reason=f"confidence {w.confidence:.2f} < {LOW_CONFIDENCE}: kept "
                                   f"as a hypothesis {where}",
                            status=MemoryStatus.HYPOTHESIS)
    if w.scope_level == "team":
        return GateDecision(decision="pending", type="memory.pending_approval",
                            reason="team memory waits for an admin's approval",
                            status=MemoryStatus.PENDING)
    if w.origin in EVIDENCE_ORIGINS and not w.evidence_ref:
        return _reject("missing_evidence", f"origin {w.origin} needs an evidence_ref")
    return GateDecision(decision="accepted", type="memory.accepted",
                        reason=f"user memory, origin {w.origin}", status=MemoryStatus.ACTIVE)


def decide(w: MemoryWrite, *, existing: Sequence[Existing], secret_detectors: Sequence[Detector],
           pii_detectors: Sequence[Detector], injection_detectors: Sequence[Detector] = (),
           suspect_detectors: Sequence[Detector] = (),
           terms: TermsOf = statement_terms) -> GateDecision:
    early = (_labels(w) or _classify(w, secret_detectors, pii_detectors, injection_detectors)
             or _suspected(w, suspect_detectors) or _duplicate(w, existing, terms))
    if early is not None:
        return early
    approval = _approval(w)
    old = _contradicted(w, existing, terms)
    if old is None or approval.status is None:
        return approval
    if approval.status is MemoryStatus.ACTIVE:
        return GateDecision(decision="superseded", type="memory.superseded",
                            reason=f"supersedes {old.memory_id}", status=MemoryStatus.ACTIVE,
                            target=old)
    # Pending (team): the old record stays active until an admin approves the new one.
    return GateDecision(decision=approval.decision, type=approval.type,
                        reason=f"{approval.reason}; would supersede {old.memory_id}",
                        status=approval.status, target=old)
