"""Where a turn's CPU goes: the bench's `small` data, turns replayed in process, profiled.

    python -m bench.profile_turns --turns 300 --top 40 [--out prof.txt]
    python -m bench.profile_turns --turns 300 --plain     # CPU per turn, no profiler

Generates and bulk-loads the same corpus as ``ctxgate bench --scale small`` into fresh
embedded stores, opens the service in this process (no HTTP server: an ASGI client), serves
every session's first turn (untimed: the cold path ``first_turn_c1`` measures), then the
``closed_c1_client_emb`` request mix one at a time under cProfile. Prints CPU seconds per turn
(``time.process_time``: the machine's load does not inflate it, unlike wall time) and the
functions with the most own and cumulative time. What it cannot see: PostgreSQL's and Redis'
own CPU, and a second worker's. Used for docs/benchmarks.md's "where the time went".

``--plain`` runs the same turns without the profiler (which inflates small calls several
times) and adds the CPU the stores' processes spent meanwhile (the bench's embedded PostgreSQL and
redis-server, all their processes, background ones included): an A/B of
a change reads the service's and the stores' CPU per turn as a deployment would pay it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import pstats
import statistics
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from app.core.conflicts import _statements
from bench.inprocess import small_service
from bench.run import Config, _requests, _stores


def _stores_cpu(owner_url: str, redis_url: str) -> float:
    """CPU seconds so far of the bench's own PostgreSQL (the postmaster serving the socket
    directory in ``owner_url``, and all its processes) and redis-server (``redis_url``'s
    port): the machine's other PostgreSQL and Redis are not counted."""
    marks = (urlsplit(owner_url).query.partition("host=")[2].partition("&")[0],
             f":{urlsplit(redis_url).port}")
    total = 0.0
    for p in psutil.process_iter(["name", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or ())
        if p.info["name"] in ("postgres", "redis-server") and any(m and m in cmd for m in marks):
            for q in (p, *p.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    t = q.cpu_times()
                    total += t.user + t.system
    return total


async def _profile(owner_url: str, redis_url: str, turns: int, top: int,
                   stats: Path | None, plain: bool) -> str:
    async with small_service(owner_url, redis_url, "prof") as svc:
        async def post(key: str, body: bytes) -> float:
            t0 = time.process_time()
            await svc.turn(key, body)
            return time.process_time() - t0

        await svc.first_turns(client_emb=True)  # untimed, as the bench
        mix = _requests(svc.ds, svc.keys, client_emb=True, n=turns, seed=42)
        for key, body in mix[:20]:  # warm the caches the steady state has
            await post(key, body)
        if plain:
            stores0 = _stores_cpu(owner_url, redis_url)
            cpu = [await post(key, body) for key, body in mix]
            stores = _stores_cpu(owner_url, redis_url) - stores0
            return (f"turns {len(cpu)}; CPU per turn (ms), no profiler: service median "
                    f"{statistics.median(cpu) * 1000:.2f}, mean {statistics.fmean(cpu) * 1000:.2f}"
                    f"; stores mean {stores / len(cpu) * 1000:.2f}\n")
        profiler = cProfile.Profile(time.process_time)  # CPU, not the waits
        profiler.enable()
        cpu = [await post(key, body) for key, body in mix]
        profiler.disable()
    out = io.StringIO()
    out.write(f"turns {len(cpu)}; CPU per turn (ms): median "
              f"{statistics.median(cpu) * 1000:.2f}, mean {statistics.fmean(cpu) * 1000:.2f}\n")
    out.write(f"conflict statements memo: {_statements.cache_info()}\n")
    if stats is not None:
        profiler.dump_stats(stats)
    for order in ("tottime", "cumulative"):
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(top)
    return out.getvalue()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--turns", type=int, default=300)
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--out", type=Path)
    p.add_argument("--stats", type=Path, help="also write the raw profile (pstats) here")
    p.add_argument("--plain", action="store_true",
                   help="no profiler: the service's and the stores' CPU per turn only")
    args = p.parse_args()
    with _stores(Config()) as (owner_url, redis_url):
        text = asyncio.run(_profile(owner_url, redis_url, args.turns, args.top,
                                    args.stats, args.plain))
    if args.out is not None:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
