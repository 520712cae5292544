"""``ctxgate bench``: generate, bulk load, start the server, load it, measure the floor, report.

With ``owner_url``/``redis_url`` given (tests), those stores are used and nothing else is
started but the server; otherwise embedded PostgreSQL 18 (pgvector) and Redis-compatible
stores are started under a fresh directory in /tmp and removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import multiprocessing
import os
import platform
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from app.core.model import DataLevel
from app.localserver import local_server, local_stores
from app.service.keys import hash_key
from bench import api_ingest, ingest
from bench.floor import FloorTurn, measure_floor, measure_recall, percentiles
from bench.generate import SCALES, Dataset, generate, query_embedding, query_text
from bench.load import Result, Spec, run_scenario
from bench.report import summarize, targets

QUERY_USER, QUERY_GROUPS, QUERY_DOMAIN = "u0", ["g0", "g1"], "ops"


@dataclass(frozen=True, slots=True)
class Config:
    scale: str = "small"
    seed: int = 42
    out: Path | None = Path("docs/benchmarks.json")
    duration_s: float | None = None
    owner_url: str | None = None
    redis_url: str | None = None
    prefix: str = "bench"
    progress: bool = True
    workers: int = 2  # one per core of the 2-core reference machine


@contextlib.contextmanager
def _stores(cfg: Config) -> Iterator[tuple[str, str]]:
    with local_stores(cfg.owner_url, cfg.redis_url, prefix="ctxgate-bench-") as urls:
        yield urls


# The benchmark measures the server, not a tenant's quota: its few tenants at c=32 would be
# refused past the default cap on turns in flight (docs/quotas.md).
NO_QUOTAS = {"CTXGATE_QUOTA_REQUESTS_PER_S": "0", "CTXGATE_QUOTA_TURNS_CONCURRENT": "0"}


@contextlib.contextmanager
def _server(owner_url: str, redis_url: str, redis_prefix: str, workers: int,
            extra_env: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    with local_server(owner_url, redis_url, redis_prefix, workers,
                      {**NO_QUOTAS, **(extra_env or {})}) as server:
        yield server.base_url, server.pid


def _rss_mb(pid: int) -> dict[str, float] | None:
    """The server's resident memory: all its processes together, and its largest one (with
    workers, the supervisor process is small and each worker is one of the rest)."""
    try:
        import psutil

        p = psutil.Process(pid)
        sizes = [int(q.memory_info().rss) / 2**20 for q in [p, *p.children(recursive=True)]]
    except Exception:
        return None
    return {"total": round(sum(sizes), 1), "max_process": round(max(sizes), 1)}


def _body(ds: Dataset, tenant: str, session: tuple[str, str, int], rng: Any,
          prng: np.random.Generator, *, client_emb: bool) -> bytes:
    sid, user, _ = session
    doc: dict[str, Any] = {
        "session_id": sid, "user_id": user, "groups": QUERY_GROUPS, "domain": QUERY_DOMAIN,
        "data_level": "internal", "query": query_text(rng), "budget": {"max_tokens": 8000}}
    task = ds.tenant_tasks.get(tenant, {}).get(sid)
    if task is not None:
        doc["task_id"] = task
    if client_emb:
        doc["query_embedding"] = query_embedding(ds, prng)
    return orjson.dumps(doc)


def _requests(ds: Dataset, keys: dict[str, str], *, client_emb: bool, n: int,
              tenant: str | None = None, probe: str | None = None, seed: int = 0
              ) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    prng = np.random.Generator(np.random.PCG64(seed))
    out = []
    for i in range(n):
        t = tenant or ds.tenants[i % len(ds.tenants)]
        if probe is not None:
            session = ds.probes[t][probe]
        else:
            sessions = ds.tenant_sessions.get(t) or [ds.probes[t]["short"]]
            session = sessions[rng.randrange(len(sessions))]
        out.append((keys[t], _body(ds, t, session, rng, prng, client_emb=client_emb)))
    return out


def _machine() -> dict[str, Any]:
    import psutil

    return {"nproc": os.cpu_count(), "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(), "platform": platform.platform(),
            "cpu": platform.processor() or platform.machine()}


def _store_versions(owner_url: str, redis_url: str) -> dict[str, str]:
    async def go() -> dict[str, str]:
        conn = await ingest.owner_connection(owner_url)
        try:
            pg = await conn.fetchval("SHOW server_version")
            vec = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname='vector'")
        finally:
            await conn.close()
        from app.adapters.redis.client import open_redis

        r = open_redis(redis_url)
        try:
            info = await r.info("server")
        finally:
            await r.aclose()
        version = info.get("valkey_version") or info.get("redis_version")
        server = f"{info.get('server_name', 'redis')} {version}"
        return {"postgresql": str(pg), "pgvector": str(vec), "redis": server}

    return asyncio.run(go())


def run_bench(cfg: Config) -> dict[str, Any]:
    scale = SCALES[cfg.scale]
    duration = cfg.duration_s if cfg.duration_s is not None else scale.duration_s
    prefix = cfg.prefix
    redis_prefix = f"ctxgate-{prefix}"
    t_start = time.perf_counter()
    ds = generate(cfg.seed, scale, prefix, progress=cfg.progress)
    gen_s = time.perf_counter() - t_start
    rep: dict[str, Any] = {
        "config": {"scale": cfg.scale, "seed": cfg.seed, "duration_s": duration,
                   "tenants": scale.tenants, "chunks": scale.chunks,
                   "sessions": scale.sessions, "events_per_session": scale.events,
                   "checkpoints": len(ds.checkpoints), "memories": len(ds.memories),
                   "rate": scale.rate,
                   "large_tenant_chunks": ds.tenant_chunks[ds.tenants[0]],
                   "small_tenant_chunks": ds.tenant_chunks[ds.tenants[-1]],
                   "probe_turns": [scale.short_turns, scale.long_turns],
                   "server_workers": cfg.workers},
        "machine": _machine(), "generate_s": round(gen_s, 2),
    }
    with _stores(cfg) as (owner_url, redis_url):
        rep["stores"] = _store_versions(owner_url, redis_url)
        res = asyncio.run(ingest.bulk_load(ds, owner_url, progress=cfg.progress))
        tails_s = asyncio.run(ingest.write_tails(ds, redis_url, redis_prefix))
        keys = asyncio.run(ingest.create_keys(ds, owner_url))
        rep["ingest"] = {**res.as_dict(), "redis_tails_s": round(tails_s, 3)}
        _log(cfg, f"ingest {rep['ingest']}")
        rep["scenarios"], rep["server"], manifest = _load_phase(
            cfg, ds, keys, owner_url, redis_url, redis_prefix, duration, scale.rate)
        turns = [FloorTurn(t, s[0], ds.tenant_tasks.get(t, {}).get(s[0]), s[1], QUERY_GROUPS,
                           QUERY_DOMAIN, query_text(random.Random(i)),
                           query_embedding(ds, np.random.Generator(np.random.PCG64(i))),
                           hash_key(keys[t]))
                 for i, (t, s) in enumerate(
                     (t, s) for t in ds.tenants for s in ds.tenant_sessions.get(t, []))]
        floor = asyncio.run(measure_floor(owner_url, redis_url, redis_prefix, turns,
                                          manifest, n=scale.floor_turns))
        rep["floor"] = {"turns": len(floor), **percentiles(floor)}
        prng = np.random.Generator(np.random.PCG64(cfg.seed + 7))
        embs = [query_embedding(ds, prng) for _ in range(scale.recall_queries)]
        rep["recall"] = {
            name: asyncio.run(measure_recall(
                owner_url, tenant, embs, user_id=QUERY_USER, groups=QUERY_GROUPS,
                domain=QUERY_DOMAIN, level=DataLevel.INTERNAL))
            for name, tenant in (("large", ds.tenants[0]), ("small", ds.tenants[-1]))}
    sc = rep["scenarios"]

    def ratio(a: str, b: str) -> float | None:
        x, y = sc.get(a, {}).get("p50_ms"), sc.get(b, {}).get("p50_ms")
        return round(y / x, 3) if x and y else None

    rep["growth"] = {
        "session_ratio": ratio("probe_session_short", "probe_session_long"),
        "session_note": f"p50, {scale.short_turns} vs {scale.long_turns} turns "
                        f"({4 * scale.short_turns} vs {4 * scale.long_turns} events)",
        "corpus_ratio": ratio("probe_corpus_small", "probe_corpus_large"),
        "corpus_note": f"p50, tenant of {rep['config']['small_tenant_chunks']} vs "
                       f"{rep['config']['large_tenant_chunks']} chunks",
    }
    rep["targets"] = targets(rep)
    rep["total_s"] = round(time.perf_counter() - t_start, 1)
    if cfg.out is not None:
        cfg.out.parent.mkdir(parents=True, exist_ok=True)
        cfg.out.write_bytes(orjson.dumps(rep, option=orjson.OPT_INDENT_2) + b"\n")
    return rep


def _log(cfg: Config, msg: str) -> None:
    if cfg.progress:
        print(msg, file=sys.stderr)


def _load_phase(cfg: Config, ds: Dataset, keys: dict[str, str], owner_url: str,
                redis_url: str, redis_prefix: str, duration: float, rate: float
                ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    scale = SCALES[cfg.scale]
    cap = scale.max_requests
    n = 2000 if cap is None else 50
    client = _requests(ds, keys, client_emb=True, n=n, seed=cfg.seed)
    server_emb = _requests(ds, keys, client_emb=False, n=n, seed=cfg.seed + 1)
    big, small = ds.tenants[0], ds.tenants[-1]
    plan: list[Spec] = []

    def spec(name: str, reqs: list[tuple[str, bytes]], **kw: Any) -> Spec:
        return Spec(name=name, base_url="", requests=reqs, duration_s=duration,
                    max_requests=cap, **kw)

    w = 1 if cap is not None else 10  # requests before timing starts (c=1 scenarios)
    # One turn per bulk-loaded session first, timed on its own: a session's first turn
    # compacts its 60 events and scans its tool results cold. Every later scenario then
    # measures the steady state a session's second and later turns see.
    first = [(keys[t], _body(ds, t, sess, random.Random(i), np.random.Generator(
                 np.random.PCG64(i)), client_emb=True))
             for i, (t, sess) in enumerate((t, s_) for t in ds.tenants
                                           for s_ in ds.tenant_sessions.get(t, []))]
    plan += [Spec(name="first_turn_c1", base_url="", requests=first, concurrency=1,
                  duration_s=3600.0, max_requests=len(first) if cap is None else cap)]
    plan += [spec("closed_c1_client_emb", client, concurrency=1, warmup=w),
             spec("closed_c8_client_emb", client, concurrency=8),
             spec("closed_c32_client_emb", client, concurrency=32),
             spec("open_rate", client, mode="open", rate=rate),
             spec("closed_c1_server_emb", server_emb, concurrency=1, warmup=max(1, w // 3)),
             spec("probe_corpus_large", _requests(ds, keys, client_emb=True, n=200, tenant=big,
                                                  probe="short", seed=3), concurrency=1),
             spec("probe_corpus_small", _requests(ds, keys, client_emb=True, n=200,
                                                  tenant=small, probe="short", seed=3),
                  concurrency=1),
             spec("probe_session_short", _requests(ds, keys, client_emb=True, n=200,
                                                   tenant=small, probe="short", seed=4),
                  concurrency=1),
             spec("probe_session_long", _requests(ds, keys, client_emb=True, n=200,
                                                  tenant=small, probe="long", seed=4),
                  concurrency=1)]
    out: dict[str, Any] = {}
    rss: dict[str, dict[str, float] | None] = {}
    manifest: dict[str, Any] = {}
    ctx = multiprocessing.get_context("spawn")
    with _server(owner_url, redis_url, redis_prefix, cfg.workers) as (base, pid), \
            concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        rss["idle"] = _rss_mb(pid)
        for s in plan:
            s = Spec(**{**{f: getattr(s, f) for f in s.__dataclass_fields__}, "base_url": base})
            r: Result = pool.submit(run_scenario, s).result()
            out[s.name] = summarize(r)
            rss[s.name] = _rss_mb(pid)
            if r.manifest and not manifest:
                manifest = r.manifest
            _log(cfg, f"{s.name}: {out[s.name]['throughput_rps']} rps, "
                      f"p50 {out[s.name]['p50_ms']} p99 {out[s.name]['p99_ms']} ms "
                      f"{out[s.name]['statuses']}")
    per_worker = [v["max_process"] for v in rss.values() if v is not None]
    server = {"rss_mb": rss, "rss_max_mb": max(per_worker) if per_worker else None,
              "workers": cfg.workers}
    return out, server, manifest


def run_api_ingest(cfg: Config, *, single_items: int, batch_items: int,
                   embedder: str = "e5", runs: int = 1) -> dict[str, Any]:
    """``--api-ingest``: items/s of memories and documents through the HTTP API, one per
    request against batches (``bench.api_ingest``), on fresh stores and a started server
    embedding with ``embedder`` (``api_ingest.EMBEDDERS``); ``runs`` times back to back
    (fresh stores and server each), reported as medians (``api_ingest.medians``)."""
    t_start = time.perf_counter()
    rep: dict[str, Any] = {
        "config": {"single_items": single_items, "batch_items": batch_items,
                   "batch": api_ingest.BATCH, "seed": cfg.seed, "server_workers": cfg.workers,
                   "embedder": embedder, "embedder_note": api_ingest.EMBEDDERS[embedder],
                   "runs": runs},
        "machine": _machine()}
    rounds: list[dict[str, Any]] = []
    for n in range(runs):
        with _stores(cfg) as (owner_url, redis_url), api_ingest.server_env(embedder) as env:
            rep["stores"] = _store_versions(owner_url, redis_url)
            prefix = f"{cfg.prefix}r{n}"  # fresh tenants even on stores a test passed in
            with _server(owner_url, redis_url, f"ctxgate-{prefix}", cfg.workers,
                         env) as (base, _):
                rounds.append(api_ingest.measure(
                    base, owner_url, prefix=prefix, seed=cfg.seed, single_items=single_items,
                    batch_items=batch_items, log=lambda m: _log(cfg, m),
                    client=embedder == "client"))
    rep["scenarios"] = rounds[0] if runs == 1 else api_ingest.medians(rounds)
    rep["total_s"] = round(time.perf_counter() - t_start, 1)
    if cfg.out is not None:
        cfg.out.parent.mkdir(parents=True, exist_ok=True)
        cfg.out.write_bytes(orjson.dumps(rep, option=orjson.OPT_INDENT_2) + b"\n")
    return rep


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ctxgate bench", description="A reproducible benchmark of POST /v1/context on a "
        "generated corpus: latency, throughput, recall and ingest, written as JSON.")
    p.add_argument("--scale", choices=sorted(SCALES), default="small",
                   help="corpus and load size (default: %(default)s; smoke takes a minute)")
    p.add_argument("--seed", type=int, default=42, help="data generator seed (default: 42)")
    p.add_argument("--out", type=Path, default=None,
                   help="where the JSON report goes (default: docs/benchmarks.json; with "
                        "--api-ingest docs/benchmarks-api-ingest-EMBEDDER.json)")
    p.add_argument("--duration", type=float, default=None, help="seconds per scenario")
    p.add_argument("--workers", type=int, default=2, help="server worker processes")
    p.add_argument("--api-ingest", action="store_true",
                   help="measure only memory and document ingest through the HTTP API, one "
                        "item per request against batches of 100 (items/s)")
    p.add_argument("--items", type=int, nargs=2, default=(300, 2000),
                   metavar=("SINGLE", "BATCHED"),
                   help="with --api-ingest: items per single-form and per batch scenario "
                        "(default: 300 2000)")
    p.add_argument("--runs", type=int, default=1,
                   help="with --api-ingest: runs back to back, reported as medians "
                        "(default: %(default)s)")
    p.add_argument("--embedder", choices=sorted(api_ingest.EMBEDDERS), default="e5",
                   help="with --api-ingest: the server's embedder; 'instant' answers at once "
                        "from loopback, the rate embeddings made elsewhere would allow; "
                        "'client' sends each item's embedding in the request; with "
                        "--retrieval: e5 or instant (default: %(default)s)")
    p.add_argument("--retrieval", action="store_true",
                   help="measure evidence recall of POST /v1/context (knowledge and earlier "
                        "sessions) against BM25 and dense baselines (docs/benchmarks.md)")
    p.add_argument("--users", type=int, default=60,
                   help="with --retrieval: users of the generated dataset, each with 8 "
                        "earlier sessions and 6 questions (default: %(default)s)")
    p.add_argument("--dataset", type=Path, default=None,
                   help="with --retrieval: a JSONL dataset (bench/retrieval_data.py) instead "
                        "of the generated one")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.retrieval:
        _main_retrieval(args)
        return
    if args.api_ingest:
        out = args.out or Path(f"docs/benchmarks-api-ingest-{args.embedder}.json")
        ing = run_api_ingest(Config(seed=args.seed, out=out, workers=args.workers),
                             single_items=args.items[0], batch_items=args.items[1],
                             embedder=args.embedder, runs=args.runs)
        for name, r in ing["scenarios"].items():
            print(f"{name:>34}  {r if not isinstance(r, dict) else r['items_per_s']}")
        print(f"report: {out}")
        return
    args.out = args.out or Path("docs/benchmarks.json")
    rep = run_bench(Config(scale=args.scale, seed=args.seed, out=args.out,
                           duration_s=args.duration, workers=args.workers))
    for t in rep["targets"]:
        print(f"{t['status']:>12}  {t['target']}: {t['measured']} (goal {t['goal']})")
    print(f"report: {args.out}")


def _main_retrieval(args: argparse.Namespace) -> None:
    # Imported here: bench.retrieval builds on this module.
    from bench import retrieval, retrieval_data

    out = args.out or Path(f"docs/benchmarks-retrieval-{args.embedder}.json")
    data = (retrieval_data.load(args.dataset) if args.dataset is not None
            else retrieval_data.generate(args.seed, args.users))
    cfg = Config(seed=args.seed, out=out, workers=args.workers)
    rep = retrieval.run_retrieval(cfg, data=data, embedder=args.embedder,
                                  log=lambda m: _log(cfg, m))
    print(retrieval.table(rep))
    for t in rep["targets"]:
        print(f"{t['status']:>12}  {t['target']}: {t['measured']} (goal {t['goal']})")
    print(f"report: {out}")
