"""A task's first turn on a cold worker, with and without the task state's stored findings.

    python -m bench.first_turns_ab keep     # checkpoints as the service writes them
    python -m bench.first_turns_ab strip    # the same, findings cleared (rows from before 0028)

Loads the bench's ``small`` data in fresh stores (``bench.inprocess``; the loader stores each
checkpoint's findings as ``TaskService.put`` does), opens the service in process and serves
every session's first turn on a task once, timing CPU (``time.process_time``) and wall time.
Same code both ways: ``strip`` only sets ``task_checkpoints.findings`` to NULL first.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time

import asyncpg
import numpy as np

from bench.inprocess import small_service
from bench.run import Config, _body, _stores


async def _run(owner_url: str, redis_url: str, strip: bool) -> str:
    async with small_service(owner_url, redis_url, "firstturns") as svc:
        if strip:
            conn = await asyncpg.connect(owner_url.replace("postgresql+asyncpg://",
                                                           "postgresql://"))
            try:
                await conn.execute("UPDATE task_checkpoints SET findings = NULL")
            finally:
                await conn.close()
        cpu, wall = [], []
        sessions = [(t, s) for t in svc.ds.tenants for s in svc.ds.tenant_sessions.get(t, [])]
        for i, (t, sess) in enumerate(sessions):
            if svc.ds.tenant_tasks.get(t, {}).get(sess[0]) is None:
                continue
            body = _body(svc.ds, t, sess, random.Random(i),
                         np.random.Generator(np.random.PCG64(i)), client_emb=True)
            c0, w0 = time.process_time(), time.perf_counter()
            await svc.turn(svc.keys[t], body)
            cpu.append((time.process_time() - c0) * 1000)
            wall.append((time.perf_counter() - w0) * 1000)
    return (f"{'strip' if strip else 'keep'}: {len(cpu)} first turns with a task; CPU ms "
            f"median {statistics.median(cpu):.2f} mean {statistics.fmean(cpu):.2f}; wall ms "
            f"median {statistics.median(wall):.2f}")


def main() -> None:
    if sys.argv[1:] not in (["keep"], ["strip"]):
        raise SystemExit("usage: python -m bench.first_turns_ab keep|strip")
    with _stores(Config()) as (owner_url, redis_url):
        print(asyncio.run(_run(owner_url, redis_url, sys.argv[1] == "strip")))


if __name__ == "__main__":
    main()
