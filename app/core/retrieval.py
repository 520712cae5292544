"""Turn store search hits into pipeline candidates.

Contract: a chunk found by several rankers becomes ONE candidate carrying every
``(ranker, rank)`` pair, so the relevance guard can fuse them; every permission label the
store returned (tenant, ACL, domain, sensitivity, expiry) is carried over unchanged, because
the permission guard re-checks what the query already pushed down.

``retrieval_plan`` sizes a turn's retrieval by its budget: a ranked layer's depth is what the
dynamic section's share can hold in that layer's items (``ceil(share_tokens / chunk_tokens)``
for knowledge, ``event_tokens`` for other sessions' events, which are messages, not chunks),
at least the server's minimum, at most ``POOL_MAX`` per ranker; a request's
``RetrievalLimits`` replace any default (the edge refuses limits above ``POOL_MAX``).

Knowledge chunks and other sessions' events carry one priority, ``RETRIEVED_PRIORITY``: the
budget then orders them by the one score the relevance guard gives both layers, so what fills
the dynamic section is the most relevant evidence, whichever store holds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.core.model import (
    Acl,
    Budget,
    Candidate,
    DataLevel,
    Freshness,
    Kind,
    KnowledgeHit,
    Layer,
    MemoryHit,
    MemoryRecord,
    MemoryStatus,
    RetrievalLimits,
    Section,
    TranscriptHit,
    Trust,
    scanned,
)
from app.core.refs import doc_ref, event_ref, memory_ref, session_ref

STALE_RANK_PENALTY = 20  # ranks a stale memory is pushed back by before fusion
POOL_MAX = 100  # candidates one ranker returns per layer and turn, at most
# A ranked retrieval's budget priority, knowledge and transcript alike: below task state and
# memories (curated, few), above older session history.
RETRIEVED_PRIORITY = 40
# A transcript hit's ranker as the manifest names it: words stay "transcript" (what manifests
# have always said), meaning is "transcript_vector".
_TRANSCRIPT_RANKER = {"fts": "transcript", "vector": "transcript_vector"}


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalDefaults:
    """The server's side of ``retrieval_plan`` (settings)."""

    knowledge_min: int  # the knowledge depth of the smallest budget
    chunk_tokens: int  # a typical chunk's tokens: what one more unit of depth costs
    event_tokens: int  # a typical session event's (a message's) tokens, the same for events
    memory: int
    session: int
    floor: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalPlan:
    """One turn's retrieval: rows per ranker (and survivors of fusion) per layer, and the
    relevance floor."""

    knowledge: int
    memory: int
    session: int
    floor: float

    def limits(self) -> dict[Layer, int]:
        """The relevance guard's per-layer limits (memories: user and team alike)."""
        return {Layer.KNOWLEDGE: self.knowledge, Layer.SESSION: self.session,
                Layer.USER: self.memory, Layer.TEAM: self.memory}


def budget_depth(budget: Budget, dynamic_share: float, *, chunk_tokens: int,
                    minimum: int) -> int:
    """How many items of ``chunk_tokens`` the dynamic section's share of ``budget`` can hold,
    within ``[min(minimum, POOL_MAX), POOL_MAX]``: a ranked layer's depth (knowledge chunks,
    other sessions' events), so a larger budget reads deeper and the budget stage, not a
    constant, decides what fits.

    >>> budget_depth(Budget(max_tokens=40_000, reserve_output=1000), 0.45,
    ...                 chunk_tokens=64, minimum=8)
    100
    >>> budget_depth(Budget(max_tokens=2000, reserve_output=500), 0.45,
    ...                 chunk_tokens=64, minimum=8)
    11
    """
    share = max(0, budget.max_tokens - budget.reserve_output) * dynamic_share
    fits = math.ceil(share / max(1, chunk_tokens))
    return min(POOL_MAX, max(minimum, fits))


def retrieval_plan(budget: Budget, dynamic_share: float, asked: RetrievalLimits | None,
                   defaults: RetrievalDefaults) -> RetrievalPlan:
    """The turn's depth per layer: what the request asked, else the budget-sized default."""
    asked = asked or RetrievalLimits()

    def sized(minimum: int, unit: int) -> int:
        return budget_depth(budget, dynamic_share, chunk_tokens=unit, minimum=minimum)

    return RetrievalPlan(
        knowledge=min(POOL_MAX, asked.knowledge if asked.knowledge is not None
                      else sized(defaults.knowledge_min, defaults.chunk_tokens)),
        memory=min(POOL_MAX, asked.memory if asked.memory is not None else defaults.memory),
        session=min(POOL_MAX, asked.session if asked.session is not None
                    else sized(defaults.session, defaults.event_tokens)),
        floor=asked.min_score if asked.min_score is not None else defaults.floor)


def knowledge_candidates(
    hits: Iterable[KnowledgeHit], *, count_tokens: Callable[[str], int]
) -> list[Candidate]:
    by_ref: dict[str, list[KnowledgeHit]] = {}
    for hit in hits:
        by_ref.setdefault(hit.chunk_ref, []).append(hit)
    out: list[Candidate] = []
    for ref in sorted(by_ref):
        group = by_ref[ref]
        first = group[0]
        sims = [h.similarity for h in group if h.similarity is not None]
        out.append(
            Candidate(
                ref=ref,
                kind=Kind.RETRIEVAL,
                layer=Layer.KNOWLEDGE,
                section=Section.DYNAMIC,
                role="system",
                content=first.text,
                tenant_id=first.tenant_id,
                origin=doc_ref(first.doc_id),
                trust=first.trust,
                sensitivity=first.sensitivity,
                acl=first.acl,
                domain=first.domain,
                freshness=Freshness(
                    observed_at=first.observed_at,
                    expires_at=first.expires_at,
                    revision=first.version,
                ),
                tokens=count_tokens(first.text) if first.tokens is None else first.tokens,
                scanned=scanned(first.text, first.findings),
                priority=RETRIEVED_PRIORITY,
                scores=tuple(sorted((h.ranker, h.rank) for h in group)),
                similarity=max(sims) if sims else None,
                reason="retrieved",
            )
        )
    return out


def transcript_candidates(
    hits: Iterable[TranscriptHit], *, tenant_id: str, owner_user_id: str,
    count_tokens: Callable[[str], int],
) -> list[Candidate]:
    """Matches from the caller's *other* visible sessions: evidence, fenced as data. An
    event found both by words and by meaning is one candidate with both ranks (the relevance
    guard fuses them, as it does knowledge's two rankers) and its similarity."""
    by_ref: dict[str, list[TranscriptHit]] = {}
    for h in hits:
        by_ref.setdefault(event_ref(h.session_id, h.event.seq), []).append(h)
    out: list[Candidate] = []
    for ref in sorted(by_ref):
        group = by_ref[ref]
        h = group[0]
        sims = [x.similarity for x in group if x.similarity is not None]
        out.append(Candidate(
            ref=ref,
            kind=Kind.RETRIEVAL,
            layer=Layer.SESSION,
            section=Section.DYNAMIC,
            role="system",
            content=h.event.content,
            tenant_id=tenant_id,
            origin=session_ref(h.session_id),
            trust=Trust.EVIDENCE,
            sensitivity=DataLevel.INTERNAL,
            acl=Acl(whole_tenant=True),
            owner_user_id=owner_user_id,
            freshness=Freshness(observed_at=h.event.created_at, revision=f"seq{h.event.seq}"),
            tokens=count_tokens(h.event.content),
            priority=RETRIEVED_PRIORITY,
            scores=tuple(sorted((_TRANSCRIPT_RANKER[x.ranker], x.rank) for x in group)),
            similarity=max(sims) if sims else None,
            reason="transcript search",
        ))
    return out


def instruction_candidate(
    *, tenant_id: str, ref: str, origin: str, text: str, revision: str,
    count_tokens: Callable[[str], int],
) -> Candidate:
    """The resolved instruction bundle: reviewed text, only ever in the stable section."""
    return Candidate(
        ref=ref,
        kind=Kind.INSTRUCTION,
        layer=Layer.PROJECT,
        section=Section.STABLE,
        role="system",
        content=text,
        tenant_id=tenant_id,
        origin=origin,
        trust=Trust.REVIEWED,
        sensitivity=DataLevel.INTERNAL,
        acl=Acl(whole_tenant=True),
        freshness=Freshness(revision=revision),
        tokens=count_tokens(text),
        priority=90,
        # The runtime's own caps already bounded it; cutting it further would change what
        # the agent is told to do, so it either fits or the turn is budget-too-small.
        never_compress=True,
        reason="instruction bundle",
    )


def _memory_ref(r: MemoryRecord) -> str:
    return memory_ref(r.memory_id, r.version)


def _memory_candidate(r: MemoryRecord, *, count_tokens: Callable[[str], int],
                      section: Section, reason: str, priority: int,
                      scores: tuple[tuple[str, int], ...] = ()) -> Candidate:
    hypothesis = r.status is MemoryStatus.HYPOTHESIS
    content = f"[hypothesis, task {r.task_id}] {r.statement}" if hypothesis else r.statement
    return Candidate(
        ref=_memory_ref(r),
        kind=Kind.MEMORY,
        layer=Layer.USER if r.scope_level == "user" else Layer.TEAM,
        section=section,
        role="system",
        content=content,
        tenant_id=r.tenant_id,
        origin=r.evidence_ref or f"memory://{r.origin}",
        trust=Trust.INFERRED if hypothesis else Trust.CURATED,
        sensitivity=r.sensitivity,
        acl=Acl(whole_tenant=True),
        owner_user_id=r.user_id if r.scope_level == "user" else None,
        domain=r.domain,
        freshness=Freshness(observed_at=r.observed_at, expires_at=r.expires_at,
                            revision=f"v{r.version}"),
        tokens=count_tokens(content),
        priority=priority,
        scores=scores,
        reason=reason,
    )


def memory_candidates(
    hits: Iterable[MemoryHit], *, now: datetime, revalidate_after: timedelta,
    count_tokens: Callable[[str], int],
) -> list[Candidate]:
    """Recalled memories, one candidate per record. A fact not confirmed within
    ``revalidate_after`` is down-ranked (its ranks pushed back by ``STALE_RANK_PENALTY``) and
    its reason says ``needs_revalidation``; a hypothesis is labelled as one."""
    by_id: dict[str, list[MemoryHit]] = {}
    for hit in hits:
        by_id.setdefault(hit.record.memory_id, []).append(hit)
    out: list[Candidate] = []
    for memory_id in sorted(by_id):
        group = by_id[memory_id]
        r = group[0].record
        stale = now - r.confirmed_at > revalidate_after
        penalty = STALE_RANK_PENALTY if stale else 0
        reason = ("recalled hypothesis" if r.status is MemoryStatus.HYPOTHESIS
                  else "recalled memory")
        out.append(_memory_candidate(
            r, count_tokens=count_tokens, section=Section.DYNAMIC, priority=35 if stale else 45,
            reason=f"{reason}; needs_revalidation" if stale else reason,
            scores=tuple(sorted((h.ranker, h.rank + penalty) for h in group))))
    return out


def pinned_candidates(records: Iterable[MemoryRecord], *, count_tokens: Callable[[str], int]
                      ) -> list[Candidate]:
    """The session's frozen snapshot of pinned preferences: stable section, unranked."""
    return [_memory_candidate(r, count_tokens=count_tokens, section=Section.STABLE,
                              reason="pinned preference (session snapshot)", priority=80)
            for r in records]
