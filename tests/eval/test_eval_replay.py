"""``ctxgate eval replay`` (issue 21, item 3): a live server's recorded turns replayed under
variants from the command line; the report holds shapes, never the turns' text, and a variant
that moves the turns away from what they recorded fails ``--min-overlap``."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import orjson
import pytest

from app.cli import main
from app.evaluation.replay import verdict
from tests.eval.test_eval import TOKEN, live_url

__all__ = ["live_url"]  # the module's server fixture, shared rather than rebuilt

DOC = "Refund calls time out after 30 seconds when the gateway is slow (marker kestrel-88)."


def _key(client: httpx.Client, tenant: str, role: str) -> str:
    r = client.post("/v1/admin/keys", headers={"Authorization": f"Bearer {TOKEN}"},
                    json={"tenant_id": tenant, "role": role})
    assert r.status_code == 201, r.text
    return str(r.json()["api_key"])


def test_replay_cli_reports_shapes_and_judges_variants(
        live_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    tenant = f"replay-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=live_url, timeout=60) as c:
        rt, ops = _key(c, tenant, "runtime"), _key(c, tenant, "ops")
        auth = {"Authorization": f"Bearer {rt}"}
        r = c.post("/v1/knowledge/documents", headers=auth, json={
            "doc_id": "runbook", "version": 1, "text": DOC, "trust": "reviewed",
            "sensitivity": "internal", "acl": None})
        assert r.status_code == 201, r.text
        for i in range(3):
            r = c.post("/v1/context", headers=auth, json={
                "turn_id": f"r-{i}", "user_id": "alice", "session_id": "s-cli",
                "query": "why do refund calls time out?", "budget": {"max_tokens": 3000},
                "append_events": [{"type": "message", "role": "user",
                                   "content": f"refund question {i}"}]})
            assert r.status_code == 200, r.text
    base, starved = tmp_path / "base.yaml", tmp_path / "starved.yaml"
    base.write_text("name: base\n")
    starved.write_text("name: starved\nretrieval:\n  knowledge_limit: 0\n")
    monkeypatch.setenv("CTXGATE_API_KEY", ops)
    argv = ["eval", "replay", "--url", live_url, "--session", "s-cli",
            "--variant", str(base), "--variant", str(starved), "--out", str(tmp_path / "o")]

    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0  # no variant fails more turns than the baseline
    out = capsys.readouterr().out
    assert "PASSED" in out and "starved" in out
    raw = (tmp_path / "o" / "replay.json").read_text()
    data = orjson.loads(raw)
    assert [t["turn_id"] for t in data["turns"]] == ["r-0", "r-1", "r-2"]
    assert data["summary"]["base"]["turns_changed"] == 0
    assert data["summary"]["starved"]["turns_changed"] == 3
    assert all("kb://runbook#v1:c0" in t["variants"]["starved"]["vs_first"]["removed"]
               for t in data["turns"])
    assert "kestrel" not in raw and "refund question" not in raw
    page = (tmp_path / "o" / "replay.html").read_text()
    assert "r-2" in page and "starved" in page and "kestrel" not in page

    with pytest.raises(SystemExit) as done:
        main([*argv, "--min-overlap", "0.99"])
    assert done.value.code == 1
    assert "starved: median overlap" in capsys.readouterr().out


def test_a_variant_failing_more_turns_than_the_baseline_fails() -> None:
    summary = {
        "a": {"turns": 4, "ok": 4, "errors": {}, "median_overlap_with_recorded": 1.0},
        "b": {"turns": 4, "ok": 2, "errors": {"budget-too-small": 2},
              "median_overlap_with_recorded": 0.5}}
    assert verdict(summary, ["a", "b"], None) == [
        "b: 2 turns failed ({'budget-too-small': 2}), baseline a 0"]
    assert verdict(summary, ["b", "a"], None) == []
