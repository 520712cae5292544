"""``ctxgate bench --api-ingest`` on tiny counts, on the test stores: every scenario writes
its items through the running server and reports a rate; with ``client`` the items carry their
embeddings and the server's embedder (the loopback endpoint, which counts) embeds none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.api_ingest import BATCH
from bench.run import Config, run_api_ingest


@pytest.mark.parametrize("embedder", ["e5", "instant", "client"])
def test_api_ingest_smoke(pg_owner_url: str, redis_url: str, uid: str, tmp_path: Path,
                          embedder: str) -> None:
    out = tmp_path / "ingest.json"
    runs = 2 if embedder == "client" else 1  # two: the medians of runs back to back
    rep = run_api_ingest(Config(seed=7, out=out, owner_url=pg_owner_url, redis_url=redis_url,
                                prefix=f"b{uid}", progress=False, workers=1),
                         single_items=3, batch_items=BATCH + 5, embedder=embedder, runs=runs)
    assert json.loads(out.read_text())["config"]["embedder"] == embedder
    sc = rep["scenarios"]
    for kind, created in (("memories", "accepted"), ("documents", "ingested")):
        for mode in ("single_c1", "single_c8", f"batch{BATCH}_c1", f"batch{BATCH}_c2"):
            r = sc[f"{kind}_{mode}"]
            assert r["items_per_s"] > 0, (kind, mode, r)
            assert set(r["statuses"]) <= {"200", "201"}, r
            assert r["outcomes"].get(created, 0) == r["items"], r
            if embedder != "e5":  # the loopback endpoint counts what it embedded
                assert r["server_embedded"] == (0 if embedder == "client" else r["items"]), r
        assert sc[f"{kind}_batch{BATCH}_c1"]["requests"] == 2 * runs
        assert sc[f"{kind}_batch_vs_single_c1"] is not None
