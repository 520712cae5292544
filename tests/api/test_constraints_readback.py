"""Issue 17, items 1 and 2, on the real stores: the seeds' incident 2 replayed with the
qualifier stated by the user, inside a ``read_contract`` tool result and in a retrieved
document; a session without a task keeps its constraint; an expired or undated deadline is
kept and marked; the three read-back triggers bring out-of-window content back, recorded in
the manifest."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import ingest, turn

CLAUSE = "该折扣仅限 2026-06-30 前下单、渠道客户除外"
DECISION = "决定：渠道客户不适用第 7.2 条折扣，直销客户按合同报价。"
BUDGET = {"max_tokens": 3000, "reserve_output": 500}
ROUNDS = 26  # 52 user/assistant turns, as in the seeds' incident


def _rounds(first: int = 0, n: int = ROUNDS) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for i in range(first, first + n):
        events += [
            {"type": "message", "role": "user",
             "content": f"第 {i} 轮：请核对附件 {i} 的付款期限。"},
            {"type": "tool_call", "call_id": f"a{i}", "name": "read_annex",
             "arguments": {"annex": i}},
            {"type": "tool_result", "call_id": f"a{i}",
             "content": f"附件 {i}：" + "付款条款原文，按发票日期起算。" * 12},
            {"type": "message", "role": "assistant",
             "content": f"附件 {i} 的付款期限为 {30 + i} 天，已核对。"},
        ]
    return events


def _opening(source: str, clause: str = CLAUSE) -> list[dict[str, Any]]:
    """The review's start, the clause arriving from ``source`` (user | tool | knowledge)."""
    events: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "审阅经销合同并答复销售的折扣问题。"}]
    if source == "user":
        events.append({"type": "message", "role": "user",
                       "content": f"请记住合同第 7.2 条：{clause}。"})
    elif source == "tool":
        events += [
            {"type": "tool_call", "call_id": "rc", "name": "read_contract",
             "arguments": {"doc": "distribution-2026"}},
            {"type": "tool_result", "call_id": "rc",
             "content": f"第 7 章 价格与折扣。7.1 价格以报价单为准。7.2 {clause}。"
                        "7.3 付款期限 30 天。"}]
    events.append({"type": "message", "role": "assistant", "content": DECISION})
    return events


async def _append(client: httpx.AsyncClient, key: str, sid: str,
                  events: list[dict[str, Any]]) -> list[int]:
    r = await client.post(f"/v1/sessions/{sid}/events", headers=bearer(key),
                          json={"user_id": "alice", "events": events})
    assert r.status_code == 201, r.text
    return list(r.json()["seqs"])


async def _task(client: httpx.AsyncClient, key: str, task_id: str, sid: str,
                **extra: Any) -> None:
    r = await client.put(f"/v1/tasks/{task_id}/checkpoint", headers=bearer(key), json={
        "user_id": "alice", "goal": "答复销售团队关于经销合同折扣的问题", "session_id": sid,
        **extra})
    assert r.status_code == 200, r.text


async def _turn(client: httpx.AsyncClient, key: str, turn_id: str, sid: str,
                task_id: str | None, query: str) -> dict[str, Any]:
    r = await client.post("/v1/context", headers=bearer(key), json=turn(
        turn_id=turn_id, session_id=sid, task_id=task_id, budget=BUDGET, query=query))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["manifest"]["validation"]["ok"] is True, body["manifest"]["validation"]
    return body


def _text(body: dict[str, Any]) -> str:
    return "\n".join(s["content"] for s in body["envelope"]["segments"])


def _segment(body: dict[str, Any], ref: str) -> dict[str, Any] | None:
    return next((s for s in body["manifest"]["segments"] if s["ref"] == ref), None)


async def _checkpoint(client: httpx.AsyncClient, key: str, task_id: str) -> dict[str, Any]:
    r = await client.get(f"/v1/tasks/{task_id}/checkpoint", headers=bearer(key),
                         params={"user_id": "alice"})
    assert r.status_code == 200, r.text
    got: dict[str, Any] = r.json()
    return got


async def _retrieve_the_clause_once(client: httpx.AsyncClient, key: str, sid: str,
                                    task_id: str) -> str:
    """The contract enters through retrieval: the clause's chunk is in the first turn's
    envelope (the manifest records it), then twenty annex notes outrank it."""
    await ingest(client, key, "contract-dist",
                 f"第 7 章 价格与折扣。7.2 {CLAUSE}。", domain="payments")
    for i in range(20):
        await ingest(client, key, f"annex-note-{i}",
                     f"附件 {i} 付款期限说明：附件 {i} 的付款期限按发票日期起算，核对付款期限。",
                     domain="payments")
    first = await _turn(client, key, "t-kb-0", sid, task_id, "合同第 7.2 条折扣有什么限定条件？")
    refs: list[str] = [s["ref"] for s in first["manifest"]["segments"]
                       if s["ref"].startswith("kb://contract-dist")]
    assert refs and CLAUSE in _text(first)
    return refs[0]


@pytest.mark.parametrize("source", ["user", "tool", "knowledge"])
async def test_incident2_replay_keeps_the_clause_whatever_its_source(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, source: str) -> None:
    key = await make_key(tenant)
    sid, task_id = f"s-review-{source}", f"t-review-{source}"
    await _task(client, key, task_id, sid)
    seqs = await _append(client, key, sid, _opening(source))
    chunk = (await _retrieve_the_clause_once(client, key, sid, task_id)
             if source == "knowledge" else None)
    await _append(client, key, sid, _rounds())
    body = await _turn(client, key, f"t-{source}-end", sid, task_id, "附件的付款期限核对完了吗？")
    man = body["manifest"]
    assert man["compaction"] is not None and man["compaction"]["validation"]["ok"] is True
    text = _text(body)
    assert CLAUSE in text and "2026-06-30" in text and "渠道客户除外" in text
    cp = await _checkpoint(client, key, task_id)
    [c] = [c for c in cp["constraints"] if CLAUSE in c["text"]]
    # the user's message, or the read_contract result (after its call), or the chunk
    want_ref = chunk or f"session://{sid}/events/{seqs[1 if source == 'user' else 2]}"
    assert c["source_ref"] == want_ref and c["origin"] == source
    assert c["kind"] == "except" and c["due"] == "2026-06-30" and c["id"]
    # the answer-relevant conclusion carries the constraint, in the checkpoint and the envelope
    marker = f"[constraint:{c['id']}]"
    assert any(d.startswith(DECISION) and marker in d for d in cp["accepted_decisions"])
    assert any(DECISION in line and marker in line for line in text.splitlines())
    # read-back (a): the clause's source is outside the window, so it is read back by its ref
    assert {"reason": "read_back.missing_evidence", "ref": want_ref} in man["read_back"]
    seg = _segment(body, want_ref)
    assert seg is not None and seg["reason"] == "read_back.missing_evidence"


async def test_readback_when_the_user_cites_a_conclusion_outside_the_window(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    sid, task_id = "s-cite", "t-cite"
    await _task(client, key, task_id, sid)
    await _append(client, key, sid, _opening("user"))
    await _append(client, key, sid, _rounds())
    body = await _turn(client, key, "t-cite-1", sid, task_id, "你之前说附件 3 的付款期限是多少天？")
    cited = [r for r in body["manifest"]["read_back"]
             if r["reason"] == "read_back.cited_conclusion"]
    assert cited, body["manifest"]["read_back"]
    shown = {s["ref"]: s["content"] for s in body["envelope"]["segments"]}
    assert any("附件 3 " in shown.get(r["ref"], "") for r in cited), cited
    assert "附件 3 的付款期限为 33 天，已核对。" in _text(body), body["manifest"]["read_back"]


async def test_readback_when_a_pending_approval_is_reactivated(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    sid, task_id = "s-approve", "t-approve"
    approval = "Deploying the pricing change to production needs approval from finance."
    seqs = await _append(client, key, sid, [
        {"type": "message", "role": "user", "content": "Prepare the pricing change rollout."},
        {"type": "message", "role": "assistant", "content": approval},
        *({"type": "message", "role": "user" if i % 2 == 0 else "assistant",
           "content": f"status note {i} on the dashboard colours"} for i in range(60))])
    await _task(client, key, task_id, sid, pending_approvals=[approval])
    quiet = await _turn(client, key, "t-ap-0", sid, task_id, "Which colour is the header?")
    assert quiet["manifest"]["read_back"] == []  # nothing re-activated: nothing read back
    assert _segment(quiet, f"session://{sid}/events/{seqs[1]}") is None  # out of the window
    body = await _turn(client, key, "t-ap-1", sid, task_id,
                       "Finance approved the pricing change for production, proceed.")
    ref = f"session://{sid}/events/{seqs[1]}"
    assert {"reason": "read_back.approval_reactivated", "ref": ref} in body["manifest"][
        "read_back"]
    seg = _segment(body, ref)
    assert seg is not None and seg["reason"] == "read_back.approval_reactivated"


async def test_a_session_without_a_task_keeps_its_constraint(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    sid = "s-no-task"
    await _append(client, key, sid, _opening("tool"))
    await _append(client, key, sid, _rounds())
    body = await _turn(client, key, "t-nt-1", sid, None, "附件的付款期限核对完了吗？")
    assert body["manifest"]["compaction"] is not None
    state = [s for s in body["envelope"]["segments"]
             if s["ref"].startswith(f"session://{sid}/state/")]
    assert state and any(CLAUSE in s["content"] for s in state)
    assert any(c["type"] == "validate.constraints_verbatim" and c["ok"]
               for c in body["manifest"]["validation"]["checks"])
    # more rounds: the archive window moves on, the state still carries the clause
    await _append(client, key, sid, _rounds(ROUNDS, ROUNDS))
    later = await _turn(client, key, "t-nt-2", sid, None, "附件 40 核对完了吗？")
    assert CLAUSE in _text(later) and "[constraint:" in _text(later)


async def test_an_expired_deadline_is_marked_and_an_undated_one_flagged(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    sid, task_id = "s-dates", "t-dates"
    expired = "该折扣仅限 2020-01-31 前下单、渠道客户除外"
    undated = "The rebate applies only to orders placed before the end of next quarter."
    await _task(client, key, task_id, sid)
    await _append(client, key, sid, [*_opening("user", expired),
                                     {"type": "message", "role": "user", "content": undated}])
    await _append(client, key, sid, _rounds())
    body = await _turn(client, key, "t-dates-1", sid, task_id, "附件的付款期限核对完了吗？")
    text = _text(body)
    assert expired in text and undated in text
    cp = await _checkpoint(client, key, task_id)
    by_text = {c["text"]: c for c in cp["constraints"]}
    old = next(c for t, c in by_text.items() if expired in t)
    assert old["due"] == "2020-01-31" and old["expires_at"] == "2020-02-01T00:00:00+00:00"
    assert by_text[undated]["due"] is None and by_text[undated]["flags"] == ["date_unparsed"]
    assert f"constraint:{old['id']}, due 2020-01-31, EXPIRED, re-confirm" in text
    assert "date not understood, confirm it] " + undated in text
    assert any(q.startswith("Re-confirm: expired 2020-01-31") for q in cp["open_questions"])
    assert any(q.startswith("Confirm the date: " + undated) for q in cp["open_questions"])
