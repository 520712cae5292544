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
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from bench.inprocess import small_service
from bench.run import Config, _requests, _stores

VARIANTS: list[dict[str, Any]] = [{"name": "recorded"},
                                  {"name": "half", "budget": {"max_tokens": 4000}}]


def _kind(ref: str) -> str:
    return ref.split("://", 1)[0]


async def _measure(owner_url: str, redis_url: str, turns: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    wall = 0.0
    async with small_service(owner_url, redis_url, "replay") as svc:
        await svc.first_turns(client_emb=False)
        for key, body in _requests(svc.ds, svc.keys, client_emb=False, n=turns, seed=42):
            await svc.turn(key, body)
        for tenant in svc.ds.tenants:
            r = await svc.client.post("/v1/admin/keys", json={"tenant_id": tenant,
                                                              "role": "ops"}, headers={
                "Authorization": f"Bearer {svc.admin_token}"})
            ops = r.json()["api_key"]
            t0 = time.perf_counter()
            r = await svc.client.post("/v1/replays", json={"limit": 200, "variants": VARIANTS},
                                      headers={"Authorization": f"Bearer {ops}"})
            wall += time.perf_counter() - t0
            assert r.status_code == 200, r.text[:500]
            rows += r.json()["turns"]
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
