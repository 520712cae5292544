"""``ctxgate eval`` (issue 21, items 1 to 3): the starter suite passes on a real server and
the real stores; ``compare`` names the regression of a deliberately worse configuration and
of a broken embedder; reports are written and escape what a suite plants."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from app.cli import main
from app.evaluation import report
from app.evaluation.metrics import Answer, Segment, score
from app.evaluation.runner import Config, Runner
from app.evaluation.suite import Expect, Suite, load
from app.settings import Settings
from tests.live_server import live_server

TOKEN = "eval-test-admin-" + uuid.uuid4().hex[:8]


def _settings(pg_owner_url: str, redis_url: str, **over: Any) -> Settings:
    return Settings(database_url=pg_owner_url, redis_url=redis_url, admin_token=TOKEN,
                    redis_prefix=f"ctxgate-eval-{uuid.uuid4().hex[:8]}", **over)


@pytest.fixture(scope="module")
def live_url(pg_owner_url: str, redis_url: str) -> Iterator[str]:
    with live_server(_settings(pg_owner_url, redis_url)) as url:
        yield url


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens


def test_scoring_is_pure_and_micro_averaged() -> None:
    segs = (Segment("kb://a#v2:c0", "retrieval", 40, "refund after 45 minutes"),
            Segment("kb://menu#v1:c0", "retrieval", 60, "noodles"),
            Segment("kb://a#v1:c0", "retrieval", 10, "30 minutes"))
    got = score(Expect(relevant=["kb://a#v2"], stale=["kb://a#v1"], canaries=["SECRET-1"],
                       must_contain=["45 minutes"]),
                Answer(status=200, text="... SECRET-1 ...", segments=segs, total_tokens=110),
                k=1)
    assert got.samples["recall_at_k"] == (1, 1) and got.samples["mrr"] == (1.0, 1)
    assert got.samples["citation_precision"] == (1, 3)
    assert got.samples["noise_ratio"] == (70, 110)  # the menu and the stale chunk
    assert got.samples["freshness_error"] == (1, 1)
    assert got.samples["privacy_leakage_rate"] == (1, 1)
    assert not got.passed and ("does not leak 'SECRET-1'", False) in got.checks
    # a ref prefix never matches a longer document id
    assert score(Expect(must_include=["kb://a"]),
                 Answer(status=200, text="", segments=(segs[1],)), k=5).passed is False


def test_a_suite_is_validated_before_it_runs(tmp_path: Path) -> None:
    assert {c.set for c in load("starter").cases} == {"facts", "isolation", "compaction"}
    bad = {"format": "ctxgate-eval/1", "name": "x", "version": "1", "cases": [
        {"id": "c", "set": "facts", "keys": {"rt": {"tenant": "t"}},
         "steps": [{"key": "other", "call": "POST /v1/context"}]}]}
    with pytest.raises(ValidationError, match="undeclared keys"):
        Suite.model_validate(bad)


async def test_the_starter_suite_passes(live_url: str) -> None:
    result = await Runner(live_url, TOKEN).run(load("starter"))
    data = report.run_json(result)
    assert data["passed"], [c for c in data["cases"] if not c["passed"]]
    assert data["metrics"]["privacy_leakage_rate"] == 0.0
    assert data["metrics"]["compaction_fidelity"] == 1.0
    assert all(data["metrics"][m] is not None for m in
               ("recall_at_k", "mrr", "citation_precision", "freshness_error",
                "context_usefulness", "noise_ratio", "memory_write_precision"))


async def test_compare_names_a_worse_configuration(live_url: str) -> None:
    suite = load("starter")
    a = await Runner(live_url, TOKEN).run(suite)
    # B starves retrieval: no knowledge rows reach the turn
    b = await Runner(live_url, TOKEN, config=Config(
        name="no-knowledge", request={"retrieval": {"knowledge_limit": 0}})).run(suite)
    data = report.compare_json(a, b)
    assert not data["passed"]
    assert "recall_at_k" in data["failed"] and "case_pass_rate" in data["failed"]
    assert "<script" not in report.compare_html(data).split("<svg", 1)[0]


async def test_compare_catches_a_broken_embedder(live_url: str, pg_owner_url: str,
                                                 redis_url: str) -> None:
    suite = load("starter")
    a = await Runner(live_url, TOKEN).run(suite)
    broken = _settings(pg_owner_url, redis_url, embedder="openai",
                       openai_base_url=f"http://127.0.0.1:{_closed_port()}/v1")
    with live_server(broken) as url:
        b = await Runner(url, TOKEN, config=Config(name="embedder-down")).run(suite)
    data = report.compare_json(a, b)
    assert not data["passed"] and "case_pass_rate" in data["failed"]


def test_eval_run_cli_writes_reports(live_url: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "mini.yaml"
    suite.write_text(orjson.dumps({
        "format": "ctxgate-eval/1", "name": "mini", "version": "1",
        "cases": [{"id": "escape", "set": "isolation", "story": "<script>alert(1)</script>",
                   "keys": {"rt": {"tenant": "t"}},
                   "steps": [{"key": "rt", "call": "POST /v1/context", "body": {
                       "user_id": "u", "query": "<img src=x onerror=alert(1)>",
                       "budget": {"max_tokens": 1000}},
                       "expect": {"must_contain": ["<b>never</b>"]}}]}]}).decode())
    with pytest.raises(SystemExit) as done:
        main(["eval", "run", str(suite), "--url", live_url, "--admin-token", TOKEN,
              "--out", str(tmp_path / "out")])
    assert done.value.code == 1  # the envelope does not hold the text: the run fails
    assert "FAIL isolation   escape" in capsys.readouterr().out
    data = orjson.loads((tmp_path / "out" / "report.json").read_bytes())
    assert not data["passed"] and data["cases"][0]["failed_checks"] == [
        "step 0: holds '<b>never</b>'"]
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<b>never" not in page and "&lt;b&gt;never&lt;/b&gt;" in page
