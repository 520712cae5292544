"""Composition root: the one place where settings become stores, services and the app.

``Container.open(settings)`` builds the object graph on live connections;
``create_app(settings)`` wires it into FastAPI with a lifespan that owns the pools. Nothing
is constructed at import time.
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route

from app.adapters.embedders.factory import make_embedder
from app.adapters.faults import KINDS, fault_of
from app.adapters.postgres.audit import PgAuditLog
from app.adapters.postgres.bundles import PgBundleStore
from app.adapters.postgres.canaries import PgCanaryStore
from app.adapters.postgres.chunk_refs import PgChunkReader
from app.adapters.postgres.compactions import PgCompactionStore
from app.adapters.postgres.db import Database, replica_url, service_url
from app.adapters.postgres.embeddings import PgEmbeddingStore
from app.adapters.postgres.erasure import PgErasureStore, pg_erasers
from app.adapters.postgres.explain import PgExplainReader
from app.adapters.postgres.keys import PgKeyStore
from app.adapters.postgres.knowledge import PgKnowledgeStore, ann_settings
from app.adapters.postgres.knowledge_jobs import PgIngestJobStore
from app.adapters.postgres.manifests import PgManifestStore
from app.adapters.postgres.memories import PgMemoryStore
from app.adapters.postgres.replica import REASONS, ReplicaReads
from app.adapters.postgres.retention import PgRetentionStore
from app.adapters.postgres.session_state import PgSessionStateStore
from app.adapters.postgres.sessions import PgSessionArchive
from app.adapters.postgres.tasks import PgTaskStore
from app.adapters.postgres.vector_schema import check_embedding_dim
from app.adapters.redis.client import RedisClient, open_redis
from app.adapters.redis.client import ping as redis_ping
from app.adapters.redis.erasure import RedisEraser
from app.adapters.redis.pins import RedisPinSnapshots
from app.adapters.redis.quotas import RedisRateLimiter
from app.adapters.redis.replay import RedisReplayCache
from app.adapters.redis.session_keys import RedisSessionKeys
from app.adapters.redis.session_tail import RedisSessionTail
from app.adapters.redis.wal_fence import RedisWalFences
from app.adapters.summarizers.openai_chat import OpenAIChatSummarizer
from app.adapters.tokenizers.tiktoken_counter import TiktokenCounter
from app.api import errors
from app.api.access import RequestEnvelope
from app.api.contract import complete
from app.api.middleware import BodyLimit, RateLimitHeaders, RequestMetrics
from app.api.routes import ROUTERS
from app.core.compaction import ExtractiveSummarizer
from app.core.compaction.breaker import BreakerPolicy
from app.core.detectors import (
    ALL_DETECTORS,
    INJECTION_DETECTORS,
    LEARNED_DETECTORS,
    PII_DETECTORS,
    SECRET_DETECTORS,
)
from app.core.detectors.prefilter import Prefiltered
from app.core.embedding_space import EmbeddingSpace
from app.core.guards.safety import Detector
from app.core.model import Layer, Section
from app.core.pipeline import PipelineConfig
from app.core.quotas import QuotaLimits
from app.core.redaction import profiles_from_json
from app.core.retrieval import RetrievalDefaults
from app.integrations.mcp_server import PATH as MCP_PATH
from app.integrations.mcp_server import McpEndpoint
from app.observability import Metrics
from app.ops_ui import explorer
from app.ports import AuditLog, Embedder, ManifestStore
from app.service.admission import Admission
from app.service.assemble import Assembler
from app.service.bundle_release import BundleReleases
from app.service.bundles import BundleService
from app.service.canaries import CanaryRegistry
from app.service.compaction import CompactionService, LocalSummarizer
from app.service.constraints import ConstraintService
from app.service.detector_cache import FindingsCache, cached, fingerprint
from app.service.erasure import ErasureService, ErasureWorker
from app.service.explain import ExplainService
from app.service.ingest import IngestService, IngestWorker
from app.service.keys import KeyService
from app.service.knowledge import KnowledgeService
from app.service.memories import MemoryService
from app.service.pacing import DutyCycle
from app.service.quotas import Quotas
from app.service.recall import SessionRecall
from app.service.reembed import ReEmbedder
from app.service.replay import ReplayService
from app.service.retention import RetentionPolicy, RetentionService, RetentionWorker
from app.service.sessions import SessionService
from app.service.tasks import TaskService
from app.settings import Settings
from app.tracing import Tracing


def pipeline_config(settings: Settings, detectors: Sequence[Detector]) -> PipelineConfig:
    shares = settings.budget_shares
    return PipelineConfig(
        shares={Section.STABLE: shares.stable, Section.SESSION: shares.session,
                Section.DYNAMIC: shares.dynamic},
        limits={Layer.KNOWLEDGE: settings.knowledge_k, Layer.SESSION: settings.session_k,
                Layer.TEAM: settings.memory_k, Layer.USER: settings.memory_k},
        floor=settings.relevance_floor, similarity_baseline=settings.similarity_baseline,
        threshold_tokens=settings.reference_threshold_tokens,
        excerpt_tokens=settings.excerpt_tokens,
        detectors=tuple(detectors),
    )


def make_summarizer(settings: Settings) -> OpenAIChatSummarizer | None:
    """The compaction model, run off the hot path: an OpenAI-compatible chat model
    (``compaction_summarizer="openai"``, ``openai_base_url``/``_api_key``), or None for the
    offline extractive default (run inline)."""
    if settings.compaction_summarizer == "openai":
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return OpenAIChatSummarizer(settings.openai_base_url, key,
                                    settings.openai_summary_model,
                                    timeout_s=settings.summarizer_timeout_s)
    return None


def make_quotas(settings: Settings, redis: RedisClient, metrics: Metrics) -> Quotas:
    """Per-tenant quotas in Redis, shared by every replica (docs/quotas.md)."""
    return Quotas(
        RedisRateLimiter(redis, prefix=settings.redis_prefix),
        defaults=QuotaLimits(requests_per_s=settings.quota_requests_per_s,
                             requests_burst=settings.quota_requests_burst,
                             key_requests_per_s=settings.quota_key_requests_per_s,
                             turns_concurrent=settings.quota_turns_concurrent),
        pool_size=settings.db_pool_size, lease_ttl_s=settings.quota_lease_ttl_s,
        timeout_s=settings.quota_timeout_ms / 1000, metrics=metrics)


async def open_replica(settings: Settings, db: Database, redis: RedisClient
                       ) -> ReplicaReads | None:
    """The read replica for turns' read-only transactions, with ``db`` as its primary, when
    one is set (docs/scaling.md, "Read replicas")."""
    url = replica_url(settings)
    if url is None:
        return None
    # A fence outlives the lag bound (a replica that may serve has replayed any older write)
    # by a margin for the clocks of the probe and of Redis.
    fences = RedisWalFences(redis, prefix=settings.redis_prefix,
                            ttl_ms=math.ceil(settings.replica_max_lag_s * 2000) + 1000)
    replica = await Database.open(url, pool_size=settings.db_pool_size,
                                  read_lanes=settings.db_read_lanes,
                                  pgbouncer=settings.database_pgbouncer)
    return ReplicaReads(db, replica, fences, max_lag_s=settings.replica_max_lag_s)


def watch(metrics: Metrics, *, db: Database, findings: FindingsCache, embedder: Embedder,
          compactions: CompactionService, replica: ReplicaReads | None = None) -> None:
    """What the metrics read from their owners at each refresh (``app.dependency_metrics``):
    the caches' hits and misses, the pool's sizes and timeouts, the breakers seen, where
    turns' reads went."""
    deps = metrics.deps
    if replica is not None:
        for reason in REASONS:
            deps.follow(deps.replica_reads.labels(reason=reason),
                        partial(replica.routed.__getitem__, reason))
        deps.follow(deps.replica_fence_failures, lambda: replica.fence_failures)
    deps.follow_cache("detector", hits=lambda: findings.hits, misses=lambda: findings.misses)
    info = getattr(embedder, "cache_info", None)
    if info is not None:  # the local model caches query vectors; a remote API is not asked
        deps.follow_cache("embedding", hits=lambda: int(info()["hits"]),
                          misses=lambda: int(info()["misses"]))
    deps.follow(deps.pool_timeouts, lambda: db.pool_stats().timeouts)

    def pool() -> None:
        now = db.pool_stats()
        deps.observe_pool(max_size=now.max_size, connections=now.open, in_use=now.in_use,
                          waiting=now.waiting)

    deps.probe(pool)
    deps.probe(lambda: deps.observe_breakers(compactions.breaker_counts()))


@dataclass(kw_only=True)
class Container:
    settings: Settings
    db: Database
    redis: object
    embedder: Embedder
    metrics: Metrics
    tracing: Tracing
    keys: KeyService
    sessions: SessionService
    tasks: TaskService
    knowledge: KnowledgeService
    bundles: BundleService
    bundle_releases: BundleReleases
    memories: MemoryService
    manifests: ManifestStore
    audit: AuditLog
    explain: ExplainService
    replays: ReplayService
    assembler: Assembler
    compactions: CompactionService
    erasures: ErasureService
    erasure_worker: ErasureWorker
    ingest: IngestService
    ingest_worker: IngestWorker
    findings: FindingsCache
    recall: SessionRecall
    admission: Admission
    quotas: Quotas
    reembedder: ReEmbedder
    canaries: CanaryRegistry
    retention: RetentionService
    retention_worker: RetentionWorker
    model: OpenAIChatSummarizer | None = None  # the compaction model, when configured
    replica: ReplicaReads | None = None  # turns' reads, when a read replica is set

    @classmethod
    async def open(cls, settings: Settings, embedder: Embedder | None = None) -> Container:
        """The object graph; ``embedder`` replaces the configured one (tests)."""
        if settings.redis_url is None:
            raise ValueError("redis_url must be set (see app.cli serve)")
        db = await Database.open(service_url(settings), pool_size=settings.db_pool_size,
                                 read_lanes=settings.db_read_lanes,
                                 pgbouncer=settings.database_pgbouncer)
        embedder = embedder or make_embedder(settings)
        embeddings = PgEmbeddingStore(db)
        try:  # a schema of another dimension: refuse to start, not fail every write
            await check_embedding_dim(db, embedder.dim)
            # Rows stored before provenance was recorded are the first claimant's.
            claim = await embeddings.claim(embedder=embedder.model)
        except BaseException:
            await db.close()
            raise
        redis = open_redis(settings.redis_url)
        replica = await open_replica(settings, db, redis)
        count = TiktokenCounter(settings.tokenizer)
        # One scan decides which detectors a text needs; one cache entry per text. Session
        # events and chunks carry the findings made where they entered (Candidate.scanned)
        # and pass the cache by.
        scanner, findings = Prefiltered(ALL_DETECTORS), FindingsCache()
        (scan,) = cached((scanner,), findings)
        metrics = Metrics(classify=fault_of, kinds=KINDS)
        tracing = Tracing.from_env(os.environ, console=settings.otel_console)
        # The stores compare a query only with vectors of this space (docs/embeddings.md).
        space = EmbeddingSpace(current=embedder.model, legacy=claim.legacy)
        memory_svc = MemoryService(
            PgMemoryStore(db, space=space), embedder, secret=SECRET_DETECTORS, pii=PII_DETECTORS,
            pins=RedisPinSnapshots(redis, prefix=settings.redis_prefix,
                                   ttl_s=settings.session_tail_ttl_s),
            k=settings.memory_k, default_ttl_days=settings.memory_default_ttl_days,
            count_tokens=count, injection=INJECTION_DETECTORS, suspect=LEARNED_DETECTORS,
            metrics=metrics)
        archive = PgSessionArchive(db)
        recall = SessionRecall(archive=archive, embedder=embedder,
                               memories=memory_svc if settings.session_fact_candidates
                               else None,
                               pacing=DutyCycle(duty=settings.reembed_duty,
                                                min_pause_s=settings.reembed_pause_ms / 1000))
        session_svc = SessionService(
            archive,
            RedisSessionTail(redis, prefix=settings.redis_prefix,
                             max_len=settings.session_tail_len,
                             ttl_s=settings.session_tail_ttl_s, tokenizer=settings.tokenizer,
                             detectors=fingerprint()),
            tail_len=settings.session_tail_len, count_tokens=count, scan=scan,
            appended=recall.appended)
        task_svc = TaskService(PgTaskStore(db, detectors=fingerprint()),
                               retention_days=settings.task_checkpoint_retention_days,
                               scan=scan)
        bundle_svc = BundleService(PgBundleStore(db), detectors=SECRET_DETECTORS,
                                   count_tokens=count,
                                   revoked_policy=settings.bundle_revoked_policy,
                                   injection=INJECTION_DETECTORS)
        kstore = PgKnowledgeStore(db, tokenizer=settings.tokenizer, detectors=fingerprint(),
                                  space=space)
        mstore = PgManifestStore(db)
        explained = PgExplainReader(db, space=space)
        model = make_summarizer(settings)
        compaction_svc = CompactionService(
            sessions=session_svc, tasks=task_svc, store=PgCompactionStore(db),
            summarizer=LocalSummarizer(ExtractiveSummarizer()), model=model,
            count_tokens=count, scan=scan, detectors=fingerprint(),
            keep_recent=settings.compaction_keep_recent, metrics=metrics,
            breaker=BreakerPolicy(
                cooldown=timedelta(seconds=settings.compaction_breaker_cooldown_s)),
            clock=partial(datetime.now, UTC),
            turn_deadline_s=settings.compaction_turn_deadline_ms / 1000,
            max_jobs=settings.compaction_jobs_max,
            history_events=settings.compaction_history_events, compact_at=settings.compact_at)
        states = PgSessionStateStore(db, detectors=fingerprint())
        canaries = CanaryRegistry(PgCanaryStore(db))
        constraint_svc = ConstraintService(
            sessions=session_svc, tasks=task_svc, states=states,
            chunks=PgChunkReader(db, tokenizer=settings.tokenizer, detectors=fingerprint()),
            count_tokens=count, scan=scan)
        assembler = Assembler(
            sessions=session_svc, tasks=task_svc, bundles=bundle_svc, knowledge=kstore,
            manifests=mstore,
            replay=RedisReplayCache(redis, prefix=settings.redis_prefix,
                                    ttl_s=settings.replay_ttl_s),
            embedder=embedder, count_tokens=count, config=pipeline_config(settings, (scan,)),
            retrieval=RetrievalDefaults(
                knowledge_min=settings.knowledge_k, chunk_tokens=settings.retrieval_chunk_tokens,
                event_tokens=settings.retrieval_event_tokens,
                memory=settings.memory_k, session=settings.session_k,
                floor=settings.relevance_floor),
            history_events=settings.history_turns,
            policy_revision=settings.policy_revision, metrics=metrics,
            profiles=profiles_from_json(settings.redaction_profiles)
            if settings.redaction_profiles else {},
            replay_ttl_s=settings.replay_ttl_s,
            tracer=tracing.tracer,
            reads=partial((replica or db).shared_reads,
                          settings=ann_settings(settings.knowledge_k)),
            memories=memory_svc, memory_revalidate_days=settings.memory_revalidate_days,
            compactions=compaction_svc, constraints=constraint_svc, states=states,
            withheld=explained, audit=PgAuditLog(db), canaries=canaries)
        estore = PgErasureStore(db)
        knowledge_svc = KnowledgeService(kstore, embedder, count, scan)
        ingest_svc = IngestService(
            PgIngestJobStore(db), knowledge_svc, sync_chunks=settings.ingest_sync_chunks,
            batch=settings.ingest_batch, jobs_max=settings.ingest_jobs_max,
            pace=DutyCycle(duty=settings.ingest_duty,
                           min_pause_s=settings.reembed_pause_ms / 1000),
            attempts_max=settings.ingest_attempts_max, retention_s=settings.ingest_retention_s)
        erasure_svc = ErasureService(estore, [
            *pg_erasers(db), RedisEraser(redis, estore, prefix=settings.redis_prefix)])
        retention_svc = RetentionService(PgRetentionStore(db), RedisSessionKeys(
            redis, prefix=settings.redis_prefix), RetentionPolicy(
            manifests_days=settings.manifest_retention_days,
            audit_days=settings.audit_retention_days,
            sessions_days=settings.session_retention_days,
            knowledge_days=settings.knowledge_superseded_retention_days,
            replay_days=max(1, math.ceil(settings.replay_ttl_s / 86_400)),
            batch=settings.retention_batch), metrics=metrics)
        watch(metrics, db=db, findings=findings, embedder=embedder, compactions=compaction_svc,
              replica=replica)
        # Last: a failed start leaves the clients unpatched.
        tracing.instrument()
        return cls(
            settings=settings, db=db, redis=redis, embedder=embedder, metrics=metrics,
            tracing=tracing, replica=replica,
            keys=KeyService(PgKeyStore(db)), sessions=session_svc, tasks=task_svc,
            knowledge=knowledge_svc, bundles=bundle_svc,
            bundle_releases=BundleReleases(PgBundleStore(db), settings=PgKeyStore(db),
                                           audit=PgAuditLog(db)),
            memories=memory_svc,
            manifests=mstore,
            audit=PgAuditLog(db), assembler=assembler, compactions=compaction_svc,
            explain=ExplainService(
                turns=explained, knowledge=explained, documents=kstore,
                memories=PgMemoryStore(db, space=space),
                sessions=archive, reach=explained, tasks=PgTaskStore(db), embedder=embedder,
                clock=partial(datetime.now, UTC)),
            replays=ReplayService(turns=explained, assembler=assembler),
            erasures=erasure_svc,
            erasure_worker=ErasureWorker(erasure_svc), findings=findings, recall=recall,
            ingest=ingest_svc, ingest_worker=IngestWorker(ingest_svc),
            admission=Admission(limit=settings.turns_in_flight_max,
                                wait_s=settings.turns_admission_wait_ms / 1000,
                                metrics=metrics),
            quotas=make_quotas(settings, redis, metrics),
            reembedder=ReEmbedder(store=embeddings, embedder=embedder, space=space,
                                  batch=settings.reembed_batch,
                                  pause_s=settings.reembed_pause_ms / 1000,
                                  duty=settings.reembed_duty, metrics=metrics),
            retention=retention_svc, canaries=canaries,
            retention_worker=RetentionWorker(retention_svc,
                                             interval_s=settings.retention_interval_s),
            model=model)

    async def readiness(self) -> dict[str, bool]:
        async def pg() -> bool:
            try:
                return await self.db.migrations_current()
            except Exception:
                return False

        postgres, redis = await asyncio.gather(pg(), redis_ping(self.redis))  # type: ignore[arg-type]
        return {"postgres": postgres, "redis": redis}

    async def close(self) -> None:
        await self.erasure_worker.stop()
        await self.retention_worker.stop()
        await self.ingest_worker.stop()
        await self.ingest.aclose()
        await self.compactions.aclose()  # background jobs first: they use the stores
        await self.assembler.aclose()
        await self.recall.aclose()
        await self.reembedder.aclose()
        if self.model is not None:
            await self.model.aclose()
        await self.redis.aclose()  # type: ignore[attr-defined]
        if self.replica is not None:
            await self.replica.close()
        await self.db.close()
        self.tracing.shutdown()  # after the stores: their last spans are flushed too


# With the model, vocabularies and caches loaded, a full collection walked ~160k objects that
# live as long as the process and paused a worker for 120-200 ms: the open-loop p99
# (docs/benchmarks.md). Frozen after startup they are never walked again (full pauses ~10 ms),
# and a larger young-generation threshold makes the frequent small collections rarer.
GC_THRESHOLD = (20_000, 20, 100)


def settle_heap() -> None:
    """Collect, then freeze what startup built, and raise the collection thresholds."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def create_app(settings: Settings | None = None, container: Container | None = None) -> FastAPI:
    """The ASGI app. With ``container`` given (tests), the lifespan does not own the pools."""
    settings = settings or (container.settings if container else Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # /mcp's session manager runs inside the stores' lifespan: its tools call this app.
        async with stores_lifespan(app), mcp.running():
            yield

    @asynccontextmanager
    async def stores_lifespan(app: FastAPI) -> AsyncIterator[None]:
        if container is not None:
            app.state.container = container
            container.erasure_worker.start()
            container.ingest_worker.start()
            container.reembedder.start()
            try:
                yield
            finally:
                await container.erasure_worker.stop()
                await container.ingest_worker.stop()
                await container.ingest.aclose()
            return
        owned = await Container.open(settings)
        warm = getattr(owned.embedder, "warm", None)
        if warm is not None:  # load the model now, not on the first turn
            await warm()
        settle_heap()
        app.state.container = owned
        owned.erasure_worker.start()  # resumes jobs a crash left open, then polls
        owned.ingest_worker.start()  # the same for ingest jobs
        if settings.reembed_enabled:
            owned.reembedder.start()  # re-embeds what another embedder made, if anything
        # Not in the tests' path above: a run walks every tenant of the shared test database.
        if settings.retention_enabled:
            owned.retention_worker.start()
        try:
            yield
        finally:
            await owned.close()

    app = FastAPI(
        title="ctxgate", version="0.1.0", lifespan=lifespan,
        summary="Context-assembly gateway for AI agents: Guard before Memory.",
        # FastAPI's own telemetry would follow a global provider (which ctxgate never sets,
        # but an auto-instrumenting launcher does) with spans of its own and exception
        # messages, which may quote content, as logs: RequestEnvelope traces requests.
        telemetry={"tracing": False, "metrics": False, "logs": False,
                   "operation_spans": False, "auto_configure": False})
    if container is not None:
        app.state.container = container
    errors.install(app)
    for router in ROUTERS:
        app.include_router(router)
    def openapi() -> dict[str, Any]:
        """FastAPI's document completed with what the server keeps (``app.api.contract``)."""
        if app.openapi_schema is None:
            app.openapi_schema = complete(FastAPI.openapi(app))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    mcp = McpEndpoint(app)  # the MCP tools over streamable HTTP (app/integrations)
    app.router.routes.append(Route(MCP_PATH, mcp, include_in_schema=False))
    app.mount("/ops", explorer())  # the manifest explorer's static page (app/ops_ui)
    app.add_middleware(RateLimitHeaders)
    app.add_middleware(RequestMetrics)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    # Outside Starlette's error middleware, not among the middleware above: a 500 too is
    # answered with its request id, and logged and traced with the status the caller saw.
    stack = app.build_middleware_stack
    app.build_middleware_stack = lambda: RequestEnvelope(stack())  # type: ignore[method-assign]
    return app
