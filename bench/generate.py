"""Deterministic benchmark data: the same seed and scale give the same rows and vectors.

One tenant holds half of all knowledge; the rest is spread evenly. Chunks carry runbook-like
text (some Chinese), mixed ACLs, domains and sensitivities, and client-supplied unit
embeddings (dim 384) clustered around topic centroids, so ingest measures the store and a
query near a centroid has real neighbours. Sessions are turns of user message, tool call, long
tool result and assistant reply; two probe sessions per tenant (short and long) measure how
latency grows with session length.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

DIM = 384
TOPICS = 64
CHUNKS_PER_DOC = 4
USERS = 8
GROUPS = 4
DOMAINS = ("ops", "billing", "search")
EVENTS_PER_TURN = 4
EPOCH = datetime(2026, 11, 1, tzinfo=UTC)

WORDS = (  # noqa: SIM905 - readable as prose
    "restart nginx deploy rollback canary kubectl pod crashloop oom memory leak latency p99 "
    "alert pager oncall runbook incident postmortem database failover replica lag vacuum "
    "index bloat disk full inode certificate expiry tls handshake dns timeout retry backoff "
    "queue backlog consumer offset kafka redis eviction cache miss cpu throttling autoscale "
    "node drain cordon upgrade migration schema lock deadlock connection pool exhausted "
    "healthcheck readiness liveness probe config drift secret rotation token quota rate limit "
    "billing invoice refund webhook search reindex shard elastic snapshot restore backup"
).split()
CHINESE = ("重启服务", "回滚发布", "数据库主从切换", "磁盘空间不足", "证书过期", "连接池耗尽",
           "告警升级", "缓存击穿", "限流配置", "索引重建", "值班手册", "故障复盘")
TOOLS = ("shell", "kubectl", "psql", "grep_logs", "http_get")


@dataclass(frozen=True, slots=True)
class Scale:
    name: str
    tenants: int
    chunks: int
    sessions: int
    events: int  # per regular session
    checkpoints: int
    short_turns: int  # probe sessions, in turns of EVENTS_PER_TURN events
    long_turns: int
    duration_s: float  # per load scenario
    max_requests: int | None  # per scenario (smoke: a few)
    recall_queries: int
    floor_turns: int
    rate: float  # open-loop requests per second
    memories: int  # long-term memories, over all tenants and users


SCALES: dict[str, Scale] = {
    "smoke": Scale("smoke", tenants=3, chunks=240, sessions=3, events=12, checkpoints=3,
                   short_turns=2, long_turns=6, duration_s=0.3, max_requests=3,
                   recall_queries=3, floor_turns=5, rate=20.0, memories=24),
    "small": Scale("small", tenants=10, chunks=10_000, sessions=100, events=60,
                   checkpoints=50, short_turns=10, long_turns=200, duration_s=10.0,
                   max_requests=None, recall_queries=50, floor_turns=300, rate=50.0,
                   memories=2_000),
    "full": Scale("full", tenants=50, chunks=100_000, sessions=1000, events=60,
                  checkpoints=200, short_turns=10, long_turns=200, duration_s=20.0,
                  max_requests=None, recall_queries=100, floor_turns=500, rate=50.0,
                  memories=20_000),
}


@dataclass(slots=True)
class Dataset:
    seed: int
    scale: Scale
    prefix: str
    tenants: list[str]
    docs: list[tuple[Any, ...]] = field(default_factory=list)
    chunks: list[tuple[Any, ...]] = field(default_factory=list)
    embeddings: npt.NDArray[np.float32] = field(
        default_factory=lambda: np.zeros((0, DIM), np.float32))
    sessions: list[tuple[Any, ...]] = field(default_factory=list)
    events: list[tuple[Any, ...]] = field(default_factory=list)
    checkpoints: list[tuple[Any, ...]] = field(default_factory=list)
    memories: list[tuple[Any, ...]] = field(default_factory=list)
    centroids: npt.NDArray[np.float32] = field(
        default_factory=lambda: np.zeros((0, DIM), np.float32))
    # per tenant: (session_id, user_id, n_events) of regular sessions; probes by name
    tenant_sessions: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)
    probes: dict[str, dict[str, tuple[str, str, int]]] = field(default_factory=dict)
    tenant_tasks: dict[str, dict[str, str]] = field(default_factory=dict)  # session -> task
    tenant_chunks: dict[str, int] = field(default_factory=dict)


class Progress:
    """tqdm when installed, else a plain stderr counter."""

    def __init__(self, total: int, desc: str, *, enabled: bool = True) -> None:
        self._bar: Any = None
        self._n = 0
        self._total = total
        self._desc = desc
        self._enabled = enabled
        if enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=desc, unit="row", leave=False,
                                 file=sys.stderr)
            except ImportError:  # pragma: no cover - tqdm is optional
                self._bar = None

    def update(self, n: int) -> None:
        self._n += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._enabled and (self._n == self._total or self._n % 5000 < n):
            print(f"\r{self._desc}: {self._n}/{self._total}", end="", file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self._enabled:
            print(file=sys.stderr)


def unit(v: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    out: npt.NDArray[np.float32] = (v / norms).astype(np.float32)
    return out


def runbook_text(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), rng.choice(CHINESE))
    return " ".join(words)


def query_text(rng: random.Random) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 8)))
    return text + (" " + rng.choice(CHINESE) if rng.random() < 0.2 else "")


def tenant_ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}t{i:02d}" for i in range(n)]


def chunk_shares(n_tenants: int, n_chunks: int) -> list[int]:
    """Tenant 0 holds half; the rest is spread evenly (remainder to the first ones)."""
    if n_tenants == 1:
        return [n_chunks]
    big = n_chunks // 2
    rest = n_chunks - big
    each, extra = divmod(rest, n_tenants - 1)
    return [big] + [each + (1 if i < extra else 0) for i in range(n_tenants - 1)]


def _events(rng: random.Random, turns: int, t0: datetime) -> Iterator[tuple[Any, ...]]:
    """(seq, type, role, content, call_id, name, arguments_json, is_error, created_at)."""
    seq = 0
    for turn in range(turns):
        at = t0 + timedelta(seconds=30 * turn)
        call = f"call_{turn}"
        tool = rng.choice(TOOLS)
        out = "\n".join(f"{at.isoformat()} {runbook_text(rng, 12)}"
                        for _ in range(rng.randint(20, 40)))
        rows = [
            ("message", "user", query_text(rng), None, None, None, False),
            ("tool_call", None, "", call, tool, f'{{"cmd": "{tool} {rng.choice(WORDS)}"}}',
             False),
            ("tool_result", None, out, call, None, None, rng.random() < 0.05),
            ("message", "assistant", runbook_text(rng, 40), None, None, None, False),
        ]
        for typ, role, content, call_id, name, args, err in rows:
            seq += 1
            yield (seq, typ, role, content, call_id, name, args, err, at)


def generate(seed: int, scale: Scale, prefix: str, *, progress: bool = True) -> Dataset:
    """Build every row in memory (deterministic: ``random.Random`` and PCG64 by ``seed``)."""
    import orjson

    from app.adapters.tokenizers.tiktoken_counter import TiktokenCounter
    from app.core import fts
    from app.core.detectors import ALL_DETECTORS
    from app.core.detectors.prefilter import Prefiltered
    from app.core.model import tagged_findings
    from app.service.detector_cache import fingerprint
    from app.settings import Settings

    rng = random.Random(seed)
    nrng = np.random.Generator(np.random.PCG64(seed))
    tenants = tenant_ids(prefix, scale.tenants)
    ds = Dataset(seed=seed, scale=scale, prefix=prefix, tenants=tenants)
    ds.centroids = unit(nrng.standard_normal((TOPICS, DIM)).astype(np.float32))
    shares = chunk_shares(scale.tenants, scale.chunks)
    topics = nrng.integers(0, TOPICS, scale.chunks)
    noise = nrng.standard_normal((scale.chunks, DIM)).astype(np.float32) * (0.9 / DIM ** 0.5)
    ds.embeddings = unit(ds.centroids[topics] + noise)
    bar = Progress(scale.chunks, "knowledge", enabled=progress)
    tokenizer = Settings().tokenizer  # the bench's server counts with the default
    count = TiktokenCounter(tokenizer)  # so these are the counts its ingest would store,
    scan, fp = Prefiltered(ALL_DETECTORS), fingerprint()  # and the findings
    row = 0
    for tenant, share in zip(tenants, shares, strict=True):
        ds.tenant_chunks[tenant] = share
        for d in range((share + CHUNKS_PER_DOC - 1) // CHUNKS_PER_DOC):
            doc_id = f"doc{d:06d}"
            n = min(CHUNKS_PER_DOC, share - d * CHUNKS_PER_DOC)
            acl_all = rng.random() < 0.5
            users = [] if acl_all else rng.sample([f"u{i}" for i in range(USERS)],
                                                  rng.randint(0, 2))
            groups = [] if acl_all else rng.sample([f"g{i}" for i in range(GROUPS)],
                                                   rng.randint(1, 2))
            domain = None if rng.random() < 0.6 else rng.choice(DOMAINS)
            level = rng.choices((0, 1, 2, 3), weights=(3, 4, 2, 1))[0]
            trust = rng.choice(("reviewed", "curated", "evidence"))
            observed = EPOCH - timedelta(days=rng.randint(0, 300))
            expires = None if rng.random() < 0.9 else EPOCH + timedelta(days=3650)
            ds.docs.append((tenant, doc_id, "1", 1, f"runbook {doc_id}", domain, level, trust,
                            acl_all, users, groups, observed, expires, "bench", True))
            for c in range(n):
                text = runbook_text(rng, rng.randint(40, 80))
                ds.chunks.append((tenant, doc_id, "1", c, text, count(text), row,
                                  fts.normalize(text), domain, level, trust, acl_all, users,
                                  groups, observed, expires, True, tokenizer,
                                  orjson.dumps(tagged_findings(scan(text), fp)).decode()))
                row += 1
            bar.update(n)
    bar.close()

    bar = Progress(scale.sessions + 2 * scale.tenants, "sessions", enabled=progress)
    per_tenant = [tenants[i % len(tenants)] for i in range(scale.sessions)]
    turns_regular = max(1, scale.events // EVENTS_PER_TURN)
    plan: list[tuple[str, str, int, str | None]] = [
        (t, f"s{i:05d}", turns_regular, None) for i, t in enumerate(per_tenant)]
    for t in tenants:
        plan += [(t, "probe_short", scale.short_turns, "short"),
                 (t, "probe_long", scale.long_turns, "long")]
    for i, (tenant, sid, turns, probe) in enumerate(plan):
        user = f"u{i % USERS}"
        t0 = EPOCH + timedelta(minutes=i)
        events = list(_events(rng, turns, t0))
        ds.sessions.append((tenant, sid, user, "agent0", None, len(events), t0, t0))
        ds.events += [(tenant, sid, *e, fts.normalize(e[3])) for e in events]
        entry = (sid, user, len(events))
        if probe is None:
            ds.tenant_sessions.setdefault(tenant, []).append(entry)
        else:
            ds.probes.setdefault(tenant, {})[probe] = entry
        bar.update(1)
    bar.close()

    regular = [(t, s) for t, ss in ds.tenant_sessions.items() for s in ss]
    for i in range(min(scale.checkpoints, len(regular))):
        tenant, (sid, user, _) = regular[i]
        task = f"task{i:05d}"
        body = {
            "goal": f"resolve incident {i}: {query_text(rng)}",
            "accepted_decisions": [f"drain node n{i}"],
            "verified_evidence": [f"p99 back under 200ms after {rng.choice(WORDS)}"],
            "open_questions": [query_text(rng)],
            "constraints": [{"text": "never restart the primary during business hours",
                             "kind": "policy", "source_ref": None}],
            "pending_approvals": [],
            "tool_effects": [],
            "next_safe_action": "re-run the health check",
            "admission": None,
        }
        ds.checkpoints.append((tenant, task, 1, user, sid, None, body, EPOCH))
        ds.tenant_tasks.setdefault(tenant, {})[sid] = task
    ds.memories = _memories(rng, nrng, ds)
    return ds


def _memories(rng: random.Random, nrng: np.random.Generator, ds: Dataset
              ) -> list[tuple[Any, ...]]:
    """Accepted memories (``MEMORY_COLS`` of ``bench.ingest``): four in five a user's own
    (one in thirty of those pinned), the rest team decisions; embeddings near the topics."""
    from app.core import fts
    from app.core.memory_gate import norm_sha256

    n = ds.scale.memories
    topics = nrng.integers(0, TOPICS, n)
    noise = nrng.standard_normal((n, DIM)).astype(np.float32) * (0.9 / DIM ** 0.5)
    vectors = unit(ds.centroids[topics] + noise)
    out: list[tuple[Any, ...]] = []
    for i in range(n):
        tenant, user = ds.tenants[i % len(ds.tenants)], f"u{(i // len(ds.tenants)) % USERS}"
        team = rng.random() < 0.2
        statement = f"{'team' if team else user} prefers {runbook_text(rng, rng.randint(8, 16))}"
        at = EPOCH - timedelta(days=rng.randint(0, 60))
        out.append((
            tenant, f"mem{i:06d}", statement, norm_sha256(statement),
            "team_decision" if team else "user_stated",
            f"doc://decisions/{i}" if team else None, "team" if team else "user",
            None if team else user, None if rng.random() < 0.7 else rng.choice(DOMAINS),
            user, "s-bench", 0.8, rng.choices((0, 1, 2), weights=(3, 4, 2))[0], "active",
            not team and rng.random() < 1 / 30, at, at, vectors[i], fts.normalize(statement)))
    return out


def query_embedding(ds: Dataset, rng: np.random.Generator) -> list[float]:
    topic = int(rng.integers(0, TOPICS))
    v = ds.centroids[topic] + rng.standard_normal(DIM).astype(np.float32) * (0.9 / DIM ** 0.5)
    return [float(x) for x in unit(v)]
