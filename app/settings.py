"""Settings: every knob has an environment variable with the ``CTXGATE_`` prefix.

Nothing is read at import time; ``Settings()`` is built once by the composition root (or by a
test with its own values).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class BudgetShares(BaseModel):
    """Share of the usable budget (max_tokens - reserve_output) per section."""

    stable: float = 0.2
    session: float = 0.35
    dynamic: float = 0.45


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXGATE_", env_nested_delimiter="__")

    data_dir: Path = Path(".ctxgate")
    # Owner/migration connection. The service itself connects as ``app_db_role``.
    database_url: str | None = None
    app_db_role: str = "ctxgate_app"
    app_db_password: SecretStr | None = None
    # The service's own connection, as the app role, on its own host and port (PgBouncer or a
    # proxy may sit in front); unset: derived from database_url (docs/deploy.md). Its password
    # may be left out of the URL and given as app_db_password.
    app_database_url: str | None = None
    # The app URL is a PgBouncer in transaction pooling (docs/scaling.md): no prepared
    # statement kept across transactions, jit=off set per transaction instead of at startup.
    # Migrations use database_url, straight to PostgreSQL.
    database_pgbouncer: bool = False
    # A streaming replica of that database, as the app role (app_db_password when the URL has
    # none), for each turn's read-only transaction (docs/scaling.md, "Read replicas"): read
    # while it has replayed all the primary wrote replica_max_lag_s ago and the tenant's
    # latest write; else the primary. Unset: every read on the primary.
    replica_database_url: str | None = None
    replica_max_lag_s: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    # Migrate before serving (also `ctxgate serve --migrate`); needs database_url. Unset: only
    # with the embedded stores, whose database this process owns; a deployment runs
    # `ctxgate migrate` (the migration Job) apart from the serving pods.
    migrate_on_start: bool | None = None
    redis_url: str | None = None
    redis_prefix: str = "ctxgate"
    admin_token: SecretStr | None = None

    db_pool_size: int = 20  # per worker
    # Admission control (app/service/admission.py): turns one worker runs at once; a turn that
    # finds no slot within turns_admission_wait_ms is a 503 overloaded with Retry-After, not a
    # queue that slows every turn. 0: no limit.
    turns_in_flight_max: int = 8
    turns_admission_wait_ms: int = 100
    # Quotas (docs/quotas.md), per tenant and shared by every replica through Redis: a token
    # bucket of quota_requests_per_s, quota_requests_burst deep, for every authenticated
    # request; one per API key inside it (quota_key_requests_per_s); at most
    # quota_turns_concurrent turns in flight per tenant, never more than db_pool_size - 1 (a
    # turn whose holder died frees its slot after quota_lease_ttl_s). Past one: 429
    # quota-exceeded with Retry-After. A tenant's settings override each; 0: no limit. A
    # Redis that does not answer within quota_timeout_ms lets the request through (counted);
    # the wait includes a loaded worker's event-loop lag, so it stays well above that.
    quota_requests_per_s: float = Field(default=200.0, ge=0, allow_inf_nan=False)
    quota_requests_burst: int = Field(default=400, ge=1)
    quota_key_requests_per_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    quota_turns_concurrent: int = Field(default=4, ge=0)
    quota_lease_ttl_s: float = Field(default=60.0, gt=0)
    quota_timeout_ms: int = Field(default=1000, ge=1)
    # Connections a turn's shared reads may spread over while it is its worker's only turn
    # in flight (1: always one; see Database.shared_reads).
    db_read_lanes: int = Field(default=2, ge=1)
    max_body_bytes: int = 1_048_576
    # `ctxgate serve` on SIGTERM/SIGINT (app/serving.py): /readyz answers 503 at once and
    # requests are still taken for shutdown_delay_s (for a balancer that polls readiness;
    # Kubernetes' preStop sleep does this instead), then the listener closes and in-flight
    # requests get up to drain_timeout_s before they are cancelled; then the stores stop.
    shutdown_delay_s: float = Field(default=0.0, ge=0)
    drain_timeout_s: int = Field(default=20, ge=0)
    policy_revision: str = "ctx-policy-2026-12-01"

    session_tail_len: int = 200
    session_tail_ttl_s: int = 7 * 24 * 3600
    history_turns: int = 40  # events of the tail offered as candidates
    # Retrieval depth (docs/architecture.md, "Retrieval depth and the relevance floor"): the
    # knowledge rows per ranker are what the dynamic share of the budget holds in chunks of
    # retrieval_chunk_tokens, at least knowledge_k, at most 100; a request may set its own.
    knowledge_k: int = 8
    retrieval_chunk_tokens: int = Field(default=64, ge=1)
    # Transcript hits per ranker from the caller's other sessions, at the smallest budget;
    # a larger budget reads deeper (app.core.retrieval.budget_depth), in events of
    # retrieval_event_tokens: a message is a sentence or two, not a chunk.
    session_k: int = 4
    retrieval_event_tokens: int = Field(default=32, ge=1)
    # What a user states about themselves in a session ("I prefer…") is proposed to the
    # memory write gate in the background (app.service.recall); off: sessions never do.
    session_fact_candidates: bool = True
    memory_k: int = 5  # recalled memories per ranker
    memory_revalidate_days: int = 90  # a fact not confirmed since is down-ranked, flagged
    memory_default_ttl_days: int = 90  # expiry of evidence-backed facts written without one
    task_checkpoint_retention_days: int = Field(default=30, ge=1)  # older: not served
    # Retention (docs/retention.md): a background job deletes, in batches of at most
    # retention_batch rows with one short transaction each, manifests older than
    # manifest_retention_days, audit records older than audit_retention_days (evidence: kept
    # longest), sessions idle (no append) for session_retention_days with all their events,
    # and knowledge versions superseded for knowledge_superseded_retention_days; it runs every
    # retention_interval_s in each serving process (off: retention_enabled false).
    manifest_retention_days: int = Field(default=30, ge=1)
    audit_retention_days: int = Field(default=365, ge=1)
    session_retention_days: int = Field(default=90, ge=1)
    knowledge_superseded_retention_days: int = Field(default=30, ge=1)
    retention_batch: int = Field(default=1000, ge=1, le=100_000)
    retention_interval_s: float = Field(default=3600.0, gt=0)
    retention_enabled: bool = True
    # Knowledge candidates whose relevance (0..1: the better of query-term coverage and the
    # similarity rescaled from similarity_baseline, what unrelated texts score with the
    # embedder: ~0.75 for E5) is below the floor are dropped.relevance.below_floor.
    relevance_floor: float = Field(default=0.15, ge=0.0, le=1.0)
    similarity_baseline: float = Field(default=0.75, ge=0.0, lt=1.0)
    reference_threshold_tokens: int = 512
    excerpt_tokens: int = 96
    replay_ttl_s: int = 24 * 3600
    budget_shares: BudgetShares = Field(default_factory=BudgetShares)
    # A running session whose pinned bundle revision was revoked: "fallback" re-resolves to
    # the channel's current good revision; "block" answers 409 until re-authorized.
    # Operator-defined redaction profiles, JSON (see docs/detectors.md); built-ins always exist.
    redaction_profiles: str | None = None
    bundle_revoked_policy: Literal["fallback", "block"] = "fallback"

    # Compaction (docs/compaction.md): a turn whose session history exceeds
    # compact_at x the session share of the usable budget is compacted first.
    compact_at: float = 0.8
    compaction_keep_recent: int = 6  # events of the recent tail kept verbatim (pairs whole)
    compaction_history_events: int = 2000  # archive events one compaction reads
    compaction_summarizer: Literal["extractive", "openai"] = "extractive"
    openai_summary_model: str = "gpt-4o-mini"
    # A model summarizer runs off the hot path (docs/compaction.md, "Off the hot path"): a
    # turn waits for it at most the deadline, then serves the last valid view.
    compaction_turn_deadline_ms: int = Field(default=300, ge=0)
    compaction_jobs_max: int = Field(default=32, ge=1)  # background compactions per worker
    compaction_breaker_cooldown_s: float = Field(default=300.0, gt=0)  # open → half-open
    summarizer_timeout_s: float = Field(default=60.0, gt=0)  # one model request, in full

    embedder: str = "e5"  # "e5" (offline, multilingual) | "openai"
    embedding_dim: int = 384
    # After an embedder switch, stale vectors are re-embedded in the background this many rows
    # at a time, busy at most this share of the time, pausing at least this long between
    # batches (docs/embeddings.md). The duty and pause also pace the embedding of appended
    # session events (app/service/recall.py): every background embedding shares the model's
    # CPU with turns.
    # Off: nothing is re-embedded; another embedder's vectors stay out of vector search (a
    # server sharing a database it does not own, such as the ingest benchmark's).
    reembed_enabled: bool = True
    reembed_batch: int = Field(default=16, ge=1, le=256)
    reembed_duty: float = Field(default=0.5, gt=0, le=1)
    reembed_pause_ms: int = Field(default=50, ge=0)
    # A document whose text exceeds ingest_sync_chunks chunks' worth of tokens (x 320) is
    # accepted as a job (202) and embedded in the background, ingest_batch chunks per model
    # call, at most ingest_jobs_max jobs at once per worker, busy at most ingest_duty of the
    # time; a failed attempt is retried with backoff up to ingest_attempts_max, and an ended
    # job's row is deleted after ingest_retention_s (docs/ingest.md).
    ingest_sync_chunks: int = Field(default=4, ge=0)
    ingest_batch: int = Field(default=16, ge=1, le=256)
    ingest_jobs_max: int = Field(default=1, ge=1, le=16)
    ingest_duty: float = Field(default=0.5, gt=0, le=1)
    ingest_attempts_max: int = Field(default=6, ge=1)
    ingest_retention_s: int = Field(default=86_400, ge=60)
    openai_base_url: str = "http://127.0.0.1:11434/v1"
    openai_api_key: SecretStr | None = None
    openai_embedding_model: str = "text-embedding-3-small"
    tokenizer: str = "o200k_base"

    # Observability (docs/observability.md). Traces are configured by the standard OTEL_*
    # variables (off unless set); otel_console also prints spans to stdout. Logs: one JSON
    # object per line (or text) on stderr, at log_level; one access line per request (INFO).
    otel_console: bool = False
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "text"] = "json"
