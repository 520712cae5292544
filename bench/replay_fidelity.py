"""How faithfully a replay reproduces recorded turns, and what it costs.

    python -m bench.replay_fidelity --turns 120 [--out docs/benchmarks-replay.json]

Generates and bulk-loads the ``ctxgate bench --scale small`` corpus into fresh embedded
stores, opens the service in this process (an ASGI client), serves every session's first turn
and then ``--turns`` turns of the bench's request mix (the server embeds each query: a
client's vector is not kept, so a replay could not reproduce its ranking), then replays each
tenant's turns through ``POST /v1/replays`` with two variants: ``recorded`` (each turn as it
was asked) and ``half`` (half the token budget). Reports, per variant, how many turns came
back with the same refs, the same content hashes and the same tokens as recorded, the median
overlap, and the wall time per replayed turn. Nothing changes the stores between the turns
and their replay, so every difference under ``recorded`` is one the replay itself makes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

from app.main import Container, create_app
from app.settings import Settings
from bench import ingest
from bench.generate import SCALES, generate
from bench.run import NO_QUOTAS, Config, _body, _requests, _stores

VARIANTS = [{"name": "recorded"}, {"name": "half", "budget": {"max_tokens": 4000}}]


def _kind(ref: str) -> str:
    return ref.split("://", 1)[0]


async def _measure(owner_url: str, redis_url: str, turns: int) -> dict[str, Any]:
    ds = generate(42, SCALES["small"], "replay", progress=False)
    await ingest.bulk_load(ds, owner_url, progress=False)
    await ingest.write_tails(ds, redis_url, "ctxgate-replay")
    keys = await ingest.create_keys(ds, owner_url)
    for name, value in NO_QUOTAS.items():
        os.environ[name] = value
    token = secrets.token_urlsafe()
    settings = Settings(database_url=owner_url, redis_url=redis_url,
                        redis_prefix="ctxgate-replay", admin_token=token)
    container = await Container.open(settings)
    try:
        transport = httpx.ASGITransport(app=create_app(container=container))
        async with httpx.AsyncClient(transport=transport, base_url="http://r",
                                     timeout=600) as client:
            async def post(key: str, body: bytes) -> None:
                r = await client.post("/v1/context", content=body, headers={
                    "Authorization": f"Bearer {key}", "content-type": "application/json"})
                assert r.status_code == 200, r.text[:500]

            sessions = [(t, s) for t in ds.tenants for s in ds.tenant_sessions.get(t, [])]
            for i, (t, sess) in enumerate(sessions):
                await post(keys[t], _body(ds, t, sess, random.Random(i), np.random.Generator(
                    np.random.PCG64(i)), client_emb=False))
            for key, body in _requests(ds, keys, client_emb=False, n=turns, seed=42):
                await post(key, body)
            rows: list[dict[str, Any]] = []
            wall = 0.0
            for tenant in ds.tenants:
                r = await client.post("/v1/admin/keys", headers={
                    "Authorization": f"Bearer {token}"}, json={"tenant_id": tenant,
                                                               "role": "ops"})
                ops = r.json()["api_key"]
                t0 = time.perf_counter()
                r = await client.post("/v1/replays", headers={"Authorization": f"Bearer {ops}"},
                                      json={"limit": 200, "variants": VARIANTS})
                wall += time.perf_counter() - t0
                assert r.status_code == 200, r.text[:500]
                rows += r.json()["turns"]
    finally:
        await container.close()
    replayed = [r for r in rows if r["status"] == "replayed"]
    out: dict[str, Any] = {"turns_recorded": len(rows), "turns_replayed": len(replayed),
                           "variants": {},
                           "ms_per_turn_per_variant": round(
                               wall * 1000 / max(1, len(replayed) * len(VARIANTS)), 1)}
    for v in VARIANTS:
        runs = [r["variants"][v["name"]] for r in replayed]
        ok = [x for x in runs if x["status"] == "ok"]
        same = [x for x in ok if not (x["vs_recorded"]["added"] or x["vs_recorded"]["removed"]
                                      or x["vs_recorded"]["changed"])]
        moved: Counter[str] = Counter()
        for x in ok:
            for ref in x["vs_recorded"]["added"] + x["vs_recorded"]["removed"] \
                    + x["vs_recorded"]["changed"]:
                moved[_kind(ref)] += 1
        out["variants"][v["name"]] = {
            "ok": len(ok), "errors": dict(Counter(x["error"] for x in runs
                                                  if x["status"] != "ok")),
            "same_refs_and_hashes": len(same),
            "same_tokens_too": sum(1 for x in same if x["vs_recorded"]["tokens_delta"] == 0),
            "median_overlap": statistics.median([x["vs_recorded"]["overlap"] for x in ok])
            if ok else None,
            "median_tokens_delta": statistics.median(
                [x["vs_recorded"]["tokens_delta"] for x in ok]) if ok else None,
            "differing_refs_by_kind": dict(moved),
            "differing_sample": [
                {k: x["vs_recorded"][k] for k in ("added", "removed", "changed")}
                for x in ok if x not in same][:5]}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--turns", type=int, default=120)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    with _stores(Config()) as (owner_url, redis_url):
        report = asyncio.run(_measure(owner_url, redis_url, args.turns))
    report["command"] = f"python -m bench.replay_fidelity --turns {args.turns}"
    text = orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
