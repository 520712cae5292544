"""``ctxgate eval compare`` of two bundle revisions on a real server and the real stores: the
candidate is put in shadow for the evaluation's agent, each configuration pins one revision,
and the comparison names the worse one (issue 21, "compare catches a deliberately worse
bundle revision")."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from app.cli import main
from app.evaluation import report
from app.evaluation.runner import Config, Runner
from app.evaluation.suite import Suite
from app.settings import Settings
from tests.live_server import live_server

TOKEN = "eval-bundles-admin-" + uuid.uuid4().hex[:8]
RULE = "Refunds retry at most three times (RETRY-CAP-3), then page the on-call."


def _register(revision: str, text: str) -> dict[str, Any]:
    return {"key": "admin", "call": "POST /v1/bundles", "body": {
        "bundle_id": "payments-rules", "revision": revision, "runtime": "codex",
        "files": [{"path": "AGENTS.md", "content": f"# Payments\n{text}\n"}]}}


SUITE_DATA: dict[str, Any] = {
    "format": "ctxgate-eval/1", "name": "bundle-rules", "version": "1",
    "cases": [{
        "id": "the-retry-rule-reaches-the-turn", "set": "facts",
        "story": "the bundle's retry cap is in front of the agent when it asks about retries",
        "keys": {"admin": {"tenant": "t", "role": "admin"}, "rt": {"tenant": "t"}},
        "steps": [
            _register("good", RULE),
            _register("worse", "Be helpful and concise."),
            {"key": "admin", "call": "POST /v1/bundles/payments-rules/promote",
             "body": {"revision": "good"}},
            {"key": "admin", "call": "POST /v1/bundles/payments-rules/shadow",
             "body": {"revision": "worse", "cohort": {"agents": ["eval-bot"]}}},
            {"key": "rt", "call": "POST /v1/context", "body": {
                "user_id": "u", "agent_id": "eval-bot", "query": "how often do refunds retry?",
                "budget": {"max_tokens": 2000}, "workspace": {"bundle_id": "payments-rules"}},
             "expect": {"must_contain": ["RETRY-CAP-3"]}},
            # No workspace: the configuration's revision is not forced into it.
            {"key": "rt", "call": "POST /v1/context", "body": {
                "user_id": "u", "query": "anything else?", "budget": {"max_tokens": 2000}}},
        ]}]}
SUITE = Suite.model_validate(SUITE_DATA)


@pytest.fixture(scope="module")
def live_url(pg_owner_url: str, redis_url: str) -> Iterator[str]:
    settings = Settings(database_url=pg_owner_url, redis_url=redis_url, admin_token=TOKEN,
                        redis_prefix=f"ctxgate-evalb-{uuid.uuid4().hex[:8]}")
    with live_server(settings) as url:
        yield url


def pinned(revision: str) -> Config:
    return Config(name=revision, request={"workspace": {"revision": revision}})


async def test_compare_catches_a_worse_bundle_revision(live_url: str) -> None:
    a = await Runner(live_url, TOKEN, config=pinned("good")).run(SUITE)
    b = await Runner(live_url, TOKEN, config=pinned("worse")).run(SUITE)
    assert a.passed, [s.checks for c in a.cases for _, s in c.steps]
    data = report.compare_json(a, b)
    assert not data["passed"]
    assert {"case_pass_rate", "context_usefulness"} <= set(data["failed"])


async def test_a_revision_neither_served_nor_shadowed_cannot_be_pinned(live_url: str) -> None:
    unreleased = SUITE.model_copy(deep=True)
    del unreleased.cases[0].steps[3]  # no shadow: "worse" is only registered
    got = await Runner(live_url, TOKEN, config=pinned("worse")).run(unreleased)
    turn = got.cases[0].steps[3][1]
    assert ("status 403 is 2xx", False) in turn.checks
    assert not got.passed


def test_compare_records_its_result_on_the_candidate_revision(
        live_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The bundle's own tenant (not the run's fresh ones) gets the evaluation the full gate
    reads, failed as it is, naming the report by its hash."""
    tenant = f"evalrec-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=live_url) as c:
        made = c.post("/v1/admin/keys", headers={"Authorization": f"Bearer {TOKEN}"},
                      json={"tenant_id": tenant, "role": "admin"})
        key = made.json()["api_key"]
        for step in SUITE_DATA["cases"][0]["steps"][:2]:
            assert c.post("/v1/bundles", headers={"Authorization": f"Bearer {key}"},
                          json=step["body"]).status_code == 201
    files = {}
    for name, data in (("suite", SUITE_DATA), ("a", {"request": {"workspace": {
            "revision": "good"}}}), ("b", {"request": {"workspace": {"revision": "worse"}}})):
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_bytes(orjson.dumps(data))  # JSON is YAML
    monkeypatch.setenv("CTXGATE_API_KEY", key)
    with pytest.raises(SystemExit) as done:
        main(["eval", "compare", str(files["suite"]), "--a", str(files["a"]), "--b",
              str(files["b"]), "--url", live_url, "--admin-token", TOKEN,
              "--out", str(tmp_path / "out"), "--record", "payments-rules@worse",
              "--against", "good"])
    assert done.value.code == 1
    assert "recorded: payments-rules@worse failed against good" in capsys.readouterr().out
    with httpx.Client(base_url=live_url) as c:
        rev = c.get("/v1/bundles/payments-rules/revisions/worse",
                    headers={"Authorization": f"Bearer {key}"}).json()
    [evaluation] = rev["evaluations"]
    sha = hashlib.sha256((tmp_path / "out" / "report.json").read_bytes()).hexdigest()
    assert (evaluation["suite"], evaluation["passed"], evaluation["against_revision"],
            evaluation["report_sha256"]) == ("bundle-rules", False, "good", sha)
    assert evaluation["metrics"]["case_pass_rate"] == 0.0
