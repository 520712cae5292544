"""``ctxgate eval generate`` (issue 21, item 1): the retrieval benchmark's data, generated or
read from its JSONL format, becomes a ``facts`` suite whose refs are the ground truth, which
``eval run`` accepts unchanged and scores on a real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from app.cli import main
from app.evaluation import report
from app.evaluation.generate import facts_suite
from app.evaluation.metrics import Answer, Segment, score
from app.evaluation.runner import Runner
from app.evaluation.suite import Expect, Suite
from bench import retrieval_data
from tests.eval.test_eval import TOKEN, live_url

__all__ = ["live_url"]  # the module's server fixture, shared rather than rebuilt


def _generate(tmp_path: Path, *argv: str) -> dict[str, Any]:
    out = tmp_path / "facts.yaml"
    main(["eval", "generate", *argv, "-o", str(out)])
    data = yaml.safe_load(out.read_text(encoding="utf-8"))
    Suite.model_validate(data)
    return dict(data)


def _appended(case: dict[str, Any]) -> dict[str, list[str]]:
    """session ref -> its events' contents by seq - 1, as the case appends them."""
    out: dict[str, list[str]] = {}
    for step in case["steps"]:
        if step["call"].endswith("/events"):
            sid = step["call"].split("/")[3]
            out.setdefault(sid, []).extend(e["content"] for e in step["body"]["events"])
    return out


def test_the_suite_names_each_questions_evidence(tmp_path: Path) -> None:
    data = retrieval_data.generate(7, 2)
    suite = _generate(tmp_path, "--from", "bench", "--users", "2", "--seed", "7")
    assert suite["version"] == "g2-bench-seed7-users2-k5-b4000"
    assert suite["thresholds"] == {"recall_at_k": {"min": 0.5}}
    assert len(suite["cases"]) == 2
    questions = {q.query: q for q in data.questions}
    docs = {d.doc_id: d.text for d in data.documents}
    stale_seen = 0
    for case in suite["cases"]:
        events = _appended(case)
        turns = [s for s in case["steps"] if s["call"] == "POST /v1/context"]
        assert len(turns) == 6
        # the embedding wait comes after the last append and before the first question
        calls = [s["call"] for s in case["steps"]]
        wait = calls.index("GET /v1/admin/embeddings?tenant_id={tenant:t}")
        assert all(c.endswith("/events") for c in calls[wait - 8:wait]) and calls[wait + 1:] == [
            "POST /v1/context"] * 6
        for turn in turns:
            q = questions[turn["body"]["query"]]
            assert turn["body"]["user_id"] == q.user_id
            assert turn["body"]["session_visibility"] == "all"
            [ref] = turn["expect"]["relevant"]
            if q.kind == "knowledge":
                doc_id, quote = q.evidence[0]
                assert ref == f"kb://{doc_id}" and str(quote) in docs[str(doc_id)]
            else:
                sid, seq = ref.removeprefix("session://").split("/events/")
                said = events[sid][int(seq) - 1]
                assert (sid, int(seq) - 1) == q.evidence[0]
                for old in turn["expect"].get("stale", []):
                    old_sid, old_seq = old.removeprefix("session://").split("/events/")
                    assert events[old_sid][int(old_seq) - 1] != said
                    stale_seen += 1
    assert stale_seen  # seed 7's second user moved or changed jobs


def test_a_jsonl_dataset_gives_the_same_cases(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    retrieval_data.dump(retrieval_data.generate(7, 2), path)
    from_bench = _generate(tmp_path, "--from", "bench", "--users", "2", "--seed", "7")
    from_file = _generate(tmp_path, "--from", "jsonl", str(path), "--min-recall", "0.7",
                          "--max-freshness-error", "0.2")
    assert from_file["cases"] == from_bench["cases"]  # stale refs survive the round trip
    assert from_file["name"] == "facts-set"
    assert from_file["version"].startswith("g2-jsonl-")
    assert from_file["thresholds"] == {"recall_at_k": {"min": 0.7},
                                       "freshness_error": {"max": 0.2}}
    # the same parameters give the same file
    again = tmp_path / "again.yaml"
    main(["eval", "generate", "--from", "jsonl", str(path), "--min-recall", "0.7",
          "--max-freshness-error", "0.2", "-o", str(again)])
    assert again.read_bytes() == (tmp_path / "facts.yaml").read_bytes()


def test_the_platform_key_only_reads() -> None:
    suite = facts_suite(retrieval_data.generate(7, 1), name="x", version="1")
    case = suite["cases"][0]
    Suite.model_validate(suite)
    with pytest.raises(ValidationError, match="only reads"):
        Suite.model_validate({**suite, "cases": [{**case, "steps": [
            {"key": "platform", "call": "POST /v1/admin/keys", "body": {}}]}]})
    with pytest.raises(ValidationError, match="reserved"):
        Suite.model_validate({**suite, "cases": [{**case, "keys": {
            **case["keys"], "platform": {"tenant": "t"}}}]})


async def test_a_generated_suite_runs_and_recalls(live_url: str) -> None:
    suite = Suite.model_validate(facts_suite(retrieval_data.generate(7, 1), name="facts-bench",
                                             version="tiny"))
    result = await Runner(live_url, TOKEN).run(suite)
    data = report.run_json(result)
    [case] = data["cases"]
    # every write 2xx, and the wait for the case's own tenant's events reached (other tenants'
    # backlogs on this shared server do not count)
    assert not [f for f in case["failed_checks"] if "status" in f or "reached" in f], \
        case["failed_checks"]
    assert data["metrics"]["recall_at_k"] > 0, data["metrics"]
    # an earlier session's event is found by a new session's first turn
    recalled = [s.samples["recall_at_k"][0] for step, s in result.cases[0].steps
                if step.expect.relevant and step.expect.relevant[0].startswith("session://")]
    assert recalled == [1.0, 1.0, 1.0]  # the wait makes it deterministic, not timing


def test_a_memory_made_from_the_evidence_counts_as_it() -> None:
    event, old = "session://u-s5/events/3", "session://u-s1/events/1"
    segs = (Segment("mem://m1@v1", "memory", 12, "I moved to Lisbon", origin=event),
            Segment("mem://m0@v1", "memory", 12, "I live in Porto", origin=old),
            Segment("kb://notes#v1:c0", "retrieval", 30, "chatter", origin="kb://notes"))
    got = score(Expect(relevant=[event], stale=[old]), Answer(status=200, text="",
                                                              segments=segs), k=1)
    assert got.samples["recall_at_k"] == (1, 1) and got.samples["freshness_error"] == (1, 1)
    assert got.samples["citation_precision"] == (1, 3)
    # an origin is matched like a ref: by prefix at a boundary, never a longer id
    assert score(Expect(relevant=["session://u-s5/events/3"]), Answer(
        status=200, text="", segments=(Segment("mem://m2@v1", "memory", 5, "x",
                                                origin="session://u-s5/events/31"),)),
        k=5).samples["recall_at_k"] == (0, 1)


async def test_a_wait_not_reached_in_time_fails_its_step(live_url: str) -> None:
    suite = Suite.model_validate({
        "format": "ctxgate-eval/1", "name": "wait", "version": "1", "cases": [{
            "id": "never", "set": "facts", "keys": {"rt": {"tenant": "t"}},
            "steps": [{"key": "platform", "call": "GET /v1/admin/embeddings",
                       "wait_for": {"path": "embedder", "equals": "no-such-model",
                                    "timeout_s": 1, "interval_s": 0.2}}]}]})
    data = report.run_json(await Runner(live_url, TOKEN).run(suite))
    assert data["cases"][0]["failed_checks"] == [
        "step 0: embedder reached 'no-such-model' within 1 s"]
