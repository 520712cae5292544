"""Assemble one turn: collect every layer (``collect``), run the pure pipeline, persist.

Order of effects: the manifest (and the audit records of permission drops and recalled
memories) is committed before the response exists (the turn's permission counts follow, off
the response path: ``_count_withheld``); the exact response body is then kept in
the replay cache so a retried client-chosen ``turn_id`` returns the same bytes instead of a
second manifest (a server-made one cannot be retried: nothing is kept for it).

Events the turn carries (``append``) enter the session before it is collected, after the
scope and profile checks: durably, through the same owner check as the events endpoint, and
once per client ``turn_id`` (``SessionService.append_for_turn``) -- a retry after a lost
response, after an assembly that failed, or beside a first attempt still running appends
nothing new. They stay appended when the assembly then fails (e.g. ``budget-too-small``):
a retry of that turn_id assembles over them without appending them again.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from opentelemetry.trace import Tracer

from app.core.bundles import Resolution
from app.core.candidates import query_candidate, task_state_candidates
from app.core.compile import stable_prefix_with
from app.core.conflicts import find_conflicts
from app.core.errors import Conflict, InvalidRequest, StaleRevision
from app.core.explain import audit_ref, permission_counts, record_scope
from app.core.manifest import build_manifest, envelope_body
from app.core.model import (
    Assembly,
    Candidate,
    Kind,
    KnowledgeHit,
    Principal,
    Scope,
    Segment,
    TaskCheckpoint,
    TurnRequest,
)
from app.core.pipeline import PipelineConfig, assemble
from app.core.redaction import RedactionProfile, resolve_profile
from app.core.refs import bundle_ref
from app.core.replay import AsOf
from app.core.retrieval import (
    RetrievalDefaults,
    RetrievalPlan,
    instruction_candidate,
    knowledge_candidates,
    memory_candidates,
    pinned_candidates,
    transcript_candidates,
)
from app.core.scope import check_task_admission, resolve_scope
from app.core.session_state import session_state_candidates
from app.observability import Metrics, record_counts, stage_span
from app.ports import (
    AuditLog,
    AuditRecord,
    Embedder,
    KnowledgeQuery,
    KnowledgeStore,
    ManifestStore,
    ManifestWrite,
    NewEvent,
    ReplayCache,
    SessionOwner,
    SessionStateStore,
    SharedReads,
    StoredManifest,
    TokenCounter,
)
from app.ports_explain import KnowledgeProbe
from app.service import degraded
from app.service.background import KeyedJobs
from app.service.bundles import Admitted, BundleService
from app.service.canaries import CanaryRegistry
from app.service.collect import Collected, Collector, session_budget
from app.service.compaction import Compacted, CompactionService
from app.service.constraints import ConstraintService
from app.service.memories import MemoryService
from app.service.sessions import SessionService
from app.service.tasks import TaskService
from app.tracing import stage_spans

log = logging.getLogger(__name__)

LEAKAGE_CANARY = "leakage.canary"  # the audit kind of a canary found outside its owner
PERMISSION_COUNTS = "permission.withheld"  # the audit kind of a turn's per-label counts


def request_sha256(raw: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)).hexdigest()


class Assembler:
    def __init__(
        self,
        *,
        sessions: SessionService,
        tasks: TaskService,
        bundles: BundleService,
        knowledge: KnowledgeStore,
        manifests: ManifestStore,
        replay: ReplayCache,
        embedder: Embedder,
        count_tokens: TokenCounter,
        config: PipelineConfig,
        retrieval: RetrievalDefaults,
        history_events: int,
        policy_revision: str,
        metrics: Metrics,
        tracer: Tracer,
        profiles: Mapping[str, RedactionProfile],
        replay_ttl_s: int = 24 * 3600,
        reads: SharedReads,
        memories: MemoryService | None = None,
        memory_revalidate_days: int = 90,
        compactions: CompactionService | None = None,
        constraints: ConstraintService | None = None,
        states: SessionStateStore | None = None,
        withheld: KnowledgeProbe | None = None,
        audit: AuditLog | None = None,
        counting_jobs: int = 8,
        canaries: CanaryRegistry | None = None,
    ) -> None:
        self._sessions = sessions
        self._collector = Collector(
            sessions=sessions, tasks=tasks, bundles=bundles, knowledge=knowledge,
            embedder=embedder, count_tokens=count_tokens, config=config, retrieval=retrieval,
            history_events=history_events, memories=memories, compactions=compactions,
            reads=reads, states=states, tracer=tracer)
        self._compactions = compactions
        self._constraints = constraints
        self._revalidate = timedelta(days=memory_revalidate_days)
        self._manifests = manifests
        self._replay = replay
        self._count = count_tokens
        self._config = config
        self._policy_revision = policy_revision
        self._metrics = metrics
        self._tracer = tracer
        self._profiles = profiles
        self._replay_ttl_s = replay_ttl_s
        self._withheld = withheld
        self._audit = audit  # None: no permission counts are written
        self._canaries = canaries  # None: no leakage canaries are checked
        self._counting: KeyedJobs[tuple[str, str], None] = KeyedJobs(
            limit=counting_jobs, name="permission-counts")

    async def turn(self, principal: Principal, req: TurnRequest, req_hash: str,
                   append: Sequence[NewEvent] = (), parent_session_id: str | None = None
                   ) -> bytes:
        """The turn's response body; ``append`` (needs ``req.session_id``) goes into the
        session first and the body says so (``appended.seqs``). A session the append creates
        gets ``req.agent_id`` and ``parent_session_id``, as the events endpoint's would."""
        scope = resolve_scope(principal, req)
        profile = resolve_profile(req.redaction_profile, self._profiles)  # unknown: 422
        with degraded.recording() as went_without, degraded.errors() as noted:
            cached = (await self._replay_get(scope.tenant_id, req.turn_id)
                      if req.client_turn_id else None)
            if cached is not None:
                return self._replayed(cached, req_hash)
            with stage_span(self._tracer, "ctxgate.turn") as span:
                # An id, not content: it leads from the trace to the turn's manifest.
                span.set_attribute("ctxgate.turn_id", req.turn_id)
                appended = (await self._append(scope, req, req_hash, append, parent_session_id)
                            if append else None)
                body, assembly = await self._assemble(principal, scope, req, req_hash,
                                                      profile, appended, went_without)
                if assembly is not None:
                    record_counts(span, candidates=assembly.candidates,
                                  segments=len(assembly.envelope.segments),
                                  total_tokens=assembly.envelope.total_tokens,
                                  dropped=len(assembly.dropped) + len(assembly.permission_drops))
        for dependency in went_without:
            self._metrics.degraded_turns.labels(dependency).inc()
        for dependency, error in noted:
            self._metrics.deps.failed(error, dependency)
        return body

    async def _replay_get(self, tenant_id: str, turn_id: str) -> bytes | None:
        """The replay entry of a client turn_id; without Redis, none (the turn is then
        assembled again, and a manifest already recorded answers as a race would)."""
        return await degraded.fallback("redis", self._replay.get(tenant_id, turn_id), None,
                                       "reading the replay entry")

    async def _append(self, scope: Scope, req: TurnRequest, req_hash: str,
                      events: Sequence[NewEvent], parent_session_id: str | None
                      ) -> list[int]:
        if scope.session_id is None:
            raise InvalidRequest("append_events needs a session_id")
        with stage_span(self._tracer, "ctxgate.append", events=len(events)):
            return await self._sessions.append_for_turn(
                tenant_id=scope.tenant_id, session_id=scope.session_id,
                owner=SessionOwner(user_id=scope.user_id, agent_id=req.agent_id,
                                   parent_session_id=parent_session_id),
                events=events, turn_id=req.turn_id if req.client_turn_id else None,
                request_sha256=req_hash)

    async def _assemble(self, principal: Principal, scope: Scope, req: TurnRequest,
                        req_hash: str, profile: RedactionProfile,
                        appended: list[int] | None, went_without: set[str]
                        ) -> tuple[bytes, Assembly | None]:
        t0 = time.perf_counter()
        with stage_span(self._tracer, "ctxgate.collect"):
            collected = await self._collector.collect(scope, req)
        collect_ms = (time.perf_counter() - t0) * 1000
        check_task_admission(scope, collected.checkpoint)
        now = datetime.now(UTC)
        t_compact = time.perf_counter()
        with stage_span(self._tracer, "ctxgate.compaction"):
            committed = [collected]

            async def commit() -> TaskCheckpoint | None:
                # Only before a compaction is made: a turn served the stored view commits
                # nothing (the next compaction reads the turns since, relied sources included).
                committed[0] = await self._commit_constraints(principal, scope, req,
                                                              collected, now)
                return committed[0].checkpoint

            compacted = await self._maybe_compact(principal, scope, req, collected, commit)
            collected = committed[0]
        compaction_ms = (time.perf_counter() - t_compact) * 1000
        timings = {"collect": collect_ms, "compaction": compaction_ms}
        candidates, assembly, manifest, plan = await self._build(
            scope, req, profile, collected, compacted, now, timings, went_without)
        t1 = time.perf_counter()
        out: dict[str, Any] = {"turn_id": req.turn_id, "envelope": envelope_body(assembly),
                               "manifest": manifest}
        if appended is not None:
            out["appended"] = {"seqs": appended}
        body = orjson.dumps(out)
        stored = StoredManifest(turn_id=req.turn_id, key_id=principal.key_id,
                                request_sha256=req_hash, body=manifest,
                                recorded=record_scope(
                                    scope, req, collected.tail[-1].seq if collected.tail
                                    else None))
        replay = _wrap(req_hash, body) if req.client_turn_id else None
        leaks = await self._canary_leaks(scope, principal, req.turn_id, assembly)
        with stage_span(self._tracer, "ctxgate.persist", audit=len(assembly.permission_drops)):
            written = await self._persist(scope, principal, stored, assembly, replay, leaks)
            if written.existing is not None:
                return await self._after_race(scope, req.turn_id, written.existing,
                                              req_hash), None
            for leak in leaks:  # counted once the envelope is on its way to the caller
                self._metrics.leakage_canary_hits.labels(kind=leak.detail["kind"]).inc()
            self._count_withheld(principal, scope, req, collected, plan.knowledge, assembly,
                                 now)
            if replay is not None:  # a client's turn_id: its retry gets these bytes
                await degraded.fallback(
                    "redis", self._replay.put(scope.tenant_id, req.turn_id, replay),
                    None, "writing the replay entry")
        timings["persist"] = (time.perf_counter() - t1) * 1000
        self._metrics.observe_turn(candidates=candidates, assembly=assembly, timings=timings,
                                   previous_prefix=written.previous_prefix_sha256)
        return body, assembly

    async def _build(self, scope: Scope, req: TurnRequest, profile: RedactionProfile,
                     collected: Collected, compacted: Compacted | None, now: datetime,
                     timings: dict[str, float], went_without: set[str]
                     ) -> tuple[list[Candidate], Assembly, dict[str, Any], RetrievalPlan]:
        """From what was collected (and compacted) to the manifest: candidates, read-back,
        the pure pipeline. Reads only (read-back's), writes nothing: a turn and a replay
        share it. ``timings`` (the stages before) gets the pipeline's."""
        candidates = self._candidates(scope, req, collected, now, compacted)
        checkpoint = (compacted.checkpoint if compacted is not None else None) \
            or collected.checkpoint or (collected.state.state if collected.state else None)
        read_back: list[dict[str, str]] = []
        if self._constraints is not None:
            with stage_span(self._tracer, "ctxgate.read_back"):
                extra, read_back = await self._constraints.read_back(
                    scope=scope, query=req.query, candidates=candidates, state=checkpoint,
                    compacted=compacted is not None, now=now, tail=collected.tail)
            candidates += extra
        with stage_span(self._tracer, "ctxgate.pipeline", candidates=len(candidates)):
            plan = collected.plan or self._collector.plan(req)
            start_ns = time.time_ns()
            assembly, stages = assemble(
                scope=scope, candidates=candidates, checkpoint=checkpoint,
                budget=req.budget, now=now, count_tokens=self._count,
                config=replace(self._config, limits={**self._config.limits, **plan.limits()},
                               floor=plan.floor),
                clock=time.perf_counter, profile=profile, rendering=req.render,
                query=req.query)
            stage_spans(self._tracer, start_ns, stages)
        timings.update(stages)
        manifest = build_manifest(
            scope=scope, turn_id=req.turn_id, assembly=assembly,
            max_tokens=req.budget.max_tokens, reserve_output=req.budget.reserve_output,
            redaction_profile=profile.name, policy_revision=self._policy_revision,
            created_at=now, timings_ms=timings, bundle=_bundle_record(
                collected.bundle, assembly.envelope.segments),
            conflicts=find_conflicts(assembly.envelope.segments),
            compaction=compacted.record if compacted is not None else None,
            read_back=read_back,
            retrieval={"knowledge": plan.knowledge, "memory": plan.memory,
                       "session": plan.session, "floor": plan.floor},
            degraded=sorted(went_without))
        return candidates, assembly, manifest, plan

    async def dry_run(self, scope: Scope, req: TurnRequest, *, as_of: AsOf, compaction: bool
                      ) -> dict[str, Any]:
        """A recorded turn assembled again (``app.service.replay``): the manifest it would
        record now, over the stores as they are, with its session as of ``as_of`` and, when
        ``compaction``, the session's stored compaction view (a new one is never made).
        Nothing is written, appended, committed, cached, audited or counted, and the
        envelope is not kept: the caller reads the manifest's refs, tokens and hashes."""
        profile = resolve_profile(req.redaction_profile, self._profiles)  # unknown: 422
        with degraded.recording() as went_without:
            collected = await self._collector.collect(scope, req, as_of)
            check_task_admission(scope, collected.checkpoint)
            compacted = None
            if compaction and self._compactions is not None and scope.session_id is not None:
                compacted = self._compactions.stored_view(
                    tenant_id=scope.tenant_id, session_id=scope.session_id,
                    task_id=scope.task_id, events=collected.tail,
                    owner_user_id=collected.session_owner,
                    history_tokens=sum(c.tokens for c in collected.session),
                    session_budget=session_budget(self._config, req),
                    checkpoint=collected.checkpoint, latest=collected.latest)
            _, _, manifest, _ = await self._build(scope, req, profile, collected, compacted,
                                                  datetime.now(UTC), {}, went_without)
        return manifest

    async def _commit_constraints(self, principal: Principal, scope: Scope, req: TurnRequest,
                                  got: Collected, now: datetime) -> Collected:
        """Before a compaction: commit what constrains, whatever its source
        (``ConstraintService.before_compaction``)."""
        if self._constraints is None or not got.tail:
            return got
        checkpoint, state = await self._constraints.before_compaction(
            principal=principal, scope=scope, tail=got.tail, checkpoint=got.checkpoint,
            state=got.state, now=now)
        return replace(got, checkpoint=checkpoint, state=state)

    async def _maybe_compact(self, principal: Principal, scope: Scope, req: TurnRequest,
                             got: Collected,
                             before: Callable[[], Awaitable[TaskCheckpoint | None]]
                             ) -> Compacted | None:
        """The compacted session layer when the history outgrows ``compact_at`` of its
        budget share (``CompactionService.for_turn``)."""
        if self._compactions is None or scope.session_id is None or not got.tail:
            return None
        try:
            compacted = await self._compactions.for_turn(
                principal=principal, session_id=scope.session_id, user_id=scope.user_id,
                task_id=scope.task_id, events=got.tail, owner_user_id=got.session_owner,
                history_tokens=sum(c.tokens for c in got.session), checkpoint=got.checkpoint,
                session_budget=session_budget(self._config, req), latest=got.latest,
                before=before)
        except StaleRevision:  # a concurrent checkpoint write: the turn is served uncompacted
            log.warning("session compaction failed; serving the uncompacted history",
                        exc_info=True)
            return None
        if compacted is not None and compacted.breaker_opened:
            self._metrics.compaction_breaker_open.inc()
        return compacted

    def _candidates(self, scope: Scope, req: TurnRequest, got: Collected, now: datetime,
                    compacted: Compacted | None) -> list[Candidate]:
        out: list[Candidate] = pinned_candidates(got.pins, count_tokens=self._count)
        if got.bundle is not None and got.bundle.resolution.text.strip():
            b = got.bundle.binding
            out.append(instruction_candidate(
                tenant_id=scope.tenant_id, ref=bundle_ref(b.bundle_id, b.revision),
                origin=got.bundle.origin, text=got.bundle.resolution.text,
                revision=b.revision, count_tokens=self._count))
        checkpoint = got.checkpoint
        if compacted is not None:
            out += compacted.candidates
            checkpoint = compacted.checkpoint or checkpoint  # the rebuilt revision
        else:
            out += got.session  # built once per turn, also what sized the compaction trigger
        if checkpoint is not None:
            out += task_state_candidates(checkpoint, scope.tenant_id, self._count, now)
        elif got.state is not None and scope.session_id is not None:
            out += session_state_candidates(got.state.state, session_id=scope.session_id,
                                            tenant_id=scope.tenant_id,
                                            count_tokens=self._count, now=now)
        out += knowledge_candidates(got.hits, count_tokens=self._count)
        # The transcript search reads only the caller's own sessions (a new session's too).
        out += transcript_candidates(got.transcript, tenant_id=scope.tenant_id,
                                     owner_user_id=scope.user_id, count_tokens=self._count)
        out += memory_candidates(got.memories, now=now, revalidate_after=self._revalidate,
                                 count_tokens=self._count)
        out.append(query_candidate(scope, req.query, scope.tenant_id, self._count))
        return out

    def _count_withheld(self, principal: Principal, scope: Scope, req: TurnRequest,
                        got: Collected, depth: int, assembly: Assembly, now: datetime) -> None:
        """Per label, what permission kept from the turn, written to the audit log as one
        ``permission.withheld`` record (no refs, no user): the pipeline's drops and the
        knowledge rows the search's SQL filtered out of its ``depth`` best per ranker
        (``KnowledgeProbe.withheld``, labels only). Off the response path: the probe costs
        about one more knowledge search (16-23 ms at 20k chunks in a tenant), so it runs as
        a bounded background job after the manifest is stored; beyond the bound a turn goes
        uncounted rather than waiting."""
        if self._audit is None:
            return
        audit = self._audit

        async def work() -> None:
            try:
                rows: list[KnowledgeHit] = []
                if self._withheld is not None and depth > 0:
                    rows = await self._withheld.withheld(query=KnowledgeQuery(
                        tenant_id=scope.tenant_id, user_id=scope.user_id,
                        groups=scope.groups, domain=scope.domain, max_level=scope.data_level,
                        now=now, embedding=got.embedding, text=req.query, k=depth))
                counts = permission_counts(scope, knowledge_candidates(rows, count_tokens=len),
                                           assembly.permission_drops, now)
                if counts:
                    await audit.write(tenant_id=scope.tenant_id, records=[AuditRecord(
                        turn_id=req.turn_id, kind=PERMISSION_COUNTS, principal=principal.key_id,
                        ref=None, rule=None, detail={"counts": counts})])
            except Exception:  # a count is evidence for ops, never a reason to fail anything
                log.warning("a turn's permission counts were not written", exc_info=True)

        self._counting.start((scope.tenant_id, req.turn_id), work)

    async def aclose(self) -> None:
        """Cancels the permission counts still being made (before the stores close)."""
        await self._counting.close()

    async def _canary_leaks(self, scope: Scope, principal: Principal, turn_id: str,
                            assembly: Assembly) -> list[AuditRecord]:
        """One ``leakage.canary`` audit record per (segment, canary) of the envelope where a
        registered canary stands outside its owner (``app.core.canaries``). Ids only: the
        canary's id, the leak's kind and the segment's ref; never the canary's text, the
        segment's content or the owner's tenant (the record is the turn's tenant's to read).
        One regex pass over the segments, inline: well under a millisecond for the tens of
        canaries a registry is meant to hold (docs/observability.md has the numbers)."""
        if self._canaries is None:
            return []
        matcher = await self._canaries.matcher()
        if not len(matcher):
            return []
        out: list[AuditRecord] = []
        for seg in assembly.envelope.segments:
            for leak in matcher.leaks(seg.content, tenant_id=scope.tenant_id,
                                      user_id=scope.user_id):
                log.warning("leakage canary %s found in turn %s of tenant %s (%s, segment %s)",
                            leak.canary_id, turn_id, scope.tenant_id, leak.kind, seg.id)
                out.append(AuditRecord(
                    turn_id=turn_id, kind=LEAKAGE_CANARY, principal=principal.key_id,
                    ref=seg.candidate.ref, rule=leak.kind,
                    detail={"canary_id": leak.canary_id, "kind": leak.kind,
                            "segment_id": seg.id, "user_id": scope.user_id}))
        return out

    async def _persist(self, scope: Scope, principal: Principal, stored: StoredManifest,
                       assembly: Assembly, replay: bytes | None,
                       leaks: Sequence[AuditRecord]) -> ManifestWrite:
        audit = [
            AuditRecord(turn_id=stored.turn_id, kind=d.type, principal=principal.key_id,
                        ref=audit_ref(d), rule=d.reason,
                        detail={"kind": d.kind.value, "user_id": scope.user_id})
            for d in assembly.permission_drops
        ]
        audit += _recalled(scope, principal, stored.turn_id, assembly)
        audit += leaks
        try:
            return await self._manifests.insert(
                tenant_id=scope.tenant_id, manifest=stored, audit=audit, replay=replay)
        except Exception:
            self._metrics.manifest_write_failures.inc()
            raise

    async def _after_race(self, scope: Scope, turn_id: str, existing: StoredManifest,
                          req_hash: str) -> bytes:
        if existing.request_sha256 != req_hash:
            raise Conflict(f"turn_id {turn_id!r} was already used by a different request")
        # The winner stored its response with its manifest: Redis is the fast copy, the
        # manifest row the one that survives a crash or a Redis outage between the two.
        cached = await self._replay_get(scope.tenant_id, turn_id) or \
            await self._manifests.replay(tenant_id=scope.tenant_id, turn_id=turn_id,
                                         max_age_s=self._replay_ttl_s)
        if cached is not None:
            return self._replayed(cached, req_hash)
        raise Conflict(f"turn_id {turn_id!r} was already assembled; its response has expired, "
                       f"fetch GET /v1/manifests/{turn_id} or use a new turn_id")

    @staticmethod
    def _replayed(cached: bytes, req_hash: str) -> bytes:
        stored_hash, body = cached.split(b"\n", 1)
        if stored_hash.decode() != req_hash:
            raise Conflict("turn_id was already used by a different request")
        return body


def _resolved_order(resolution: Resolution) -> list[dict[str, Any]]:
    return [{"path": f.path, "layer": f.layer, "bytes_used": f.bytes_used,
             "truncated": f.truncated, "reason": f.reason, "sha256": f.sha256}
            for f in resolution.resolved_order]


def _bundle_record(admitted: Admitted | None, segments: Sequence[Segment]
                   ) -> dict[str, Any] | None:
    """The served revision and, on a shadow cohort's turn, the shadow's: its resolved order
    and the stable prefix hash the turn would have had with it served instead."""
    if admitted is None:
        return None
    b = admitted.binding
    record: dict[str, Any] = {
        "bundle_id": b.bundle_id, "revision": b.revision, "sha256": b.sha256,
        "runtime": admitted.runtime, "rebound_from": admitted.rebound_from,
        "pinned": admitted.pinned, "resolved_order": _resolved_order(admitted.resolution)}
    shadow = admitted.shadow
    if shadow is not None:
        record["shadow"] = {
            "revision": shadow.revision, "sha256": shadow.sha256,
            "resolved_order": _resolved_order(shadow.resolution),
            "stable_prefix_sha256": stable_prefix_with(
                segments, instead_of=bundle_ref(b.bundle_id, b.revision),
                ref=bundle_ref(b.bundle_id, shadow.revision), content=shadow.resolution.text)}
    return record


def _recalled(scope: Scope, principal: Principal, turn_id: str, assembly: Assembly
              ) -> list[AuditRecord]:
    """A memory shown to a turn is an audit event (``memory.recalled``), no content."""
    return [
        AuditRecord(turn_id=turn_id, kind="memory.recalled", principal=principal.key_id,
                    ref=s.candidate.ref, rule=None,
                    detail={"user_id": scope.user_id, "layer": s.candidate.layer.value,
                            "section": s.candidate.section.value})
        for s in assembly.envelope.segments if s.candidate.kind is Kind.MEMORY
    ]


def _wrap(req_hash: str, body: bytes) -> bytes:
    return req_hash.encode() + b"\n" + body
