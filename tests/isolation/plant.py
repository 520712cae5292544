"""Plant canaries in every layer through the real HTTP API (audit records through its adapter).

Canary classes, each token unique per mode (``CANARY-<class>-<hex>``):

- ``B``  tenant B: its tenant id, users, sessions (Redis tail and Postgres archive), task
         checkpoints (goal, constraints, evidence), knowledge documents (whole tenant, ACL'd to
         the group and user tenant A's turns claim, confidential, secret, expired, an id that
         collides with one of A's), manifests and audit records of B's turns.
- ``U``  user bob inside tenant A: his session, his task checkpoint, the manifest of his turn
         (made with his own runtime key).
- ``G``  an A document ACL'd to bob and the group ``grp-bob-*``.
- ``C``  an A document above the runtime key's data level (confidential).
- ``D``  an A document of another domain (``hr``).
- ``X``  an A document whose ``expires_at`` is in the past.
- ``S``  a sibling session of alice (same tenant, same user, other session).

Ids that the attacks send (session, task, turn, doc ids) are canaries too, so an id of B
echoed in a response only counts when the request did not carry it; the *content* canaries
(``content`` set) are never sent by an attack, so any appearance of one is a leak.

Positive tokens (``OK-*``) are A's own content: a guarded mode must still return them, so an
empty answer cannot pass for isolation.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.main import Container
from app.ports import AuditRecord

DIM = 384
EMBEDDING = [0.05] * DIM  # turns pass it so no query is embedded server-side
PAST = "2020-01-01T00:00:00Z"
GROUP = "payments-oncall"


@dataclass
class Plant:
    uid: str
    ta: str
    tb: str
    bait: str
    admin_token: str
    keys: dict[str, str] = field(default_factory=dict)
    key_ids: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    classes: dict[str, str] = field(default_factory=dict)  # token -> class
    content: set[str] = field(default_factory=set)  # content tokens (never sent by attacks)
    ok: dict[str, str] = field(default_factory=dict)  # A's own content tokens
    b_turn_body: dict[str, Any] = field(default_factory=dict)

    def mint(self, cls: str, name: str, *, is_content: bool = False) -> str:
        token = f"CANARY-{cls}-{uuid.uuid4().hex[:12]}"
        self.classes[token] = cls
        self.ids[name] = token
        if is_content:
            self.content.add(token)
        return token

    def name_of(self, token: str) -> str:
        return next(n for n, t in self.ids.items() if t == token)

    def says(self, cls: str, name: str) -> str:
        """A content canary: a sentence holding a fresh token and the bait word."""
        token = self.mint(cls, name, is_content=True)
        return f"{token} refund timeout {self.bait} note {name}"

    def positive(self, name: str) -> str:
        token = f"OK-{name}-{uuid.uuid4().hex[:10]}"
        self.ok[name] = token
        return f"{token} refund timeout {self.bait} {name}"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def turn_body(p: Plant, *, user: str = "alice", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "user_id": user, "groups": [GROUP], "domain": "payments", "data_level": "internal",
        "query": f"why does the refund call time out? {p.bait}", "query_embedding": EMBEDDING,
        "budget": {"max_tokens": 6000, "reserve_output": 1000}}
    body.update(extra)
    return body


def doc_body(doc_id: str, text: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"doc_id": doc_id, "version": 1, "text": text, "domain": None,
                            "sensitivity": "internal", "trust": "reviewed", "acl": None}
    body.update(extra)
    return body


async def _ok(r: httpx.Response, status: int) -> Any:
    assert r.status_code == status, f"{r.request.method} {r.request.url}: {r.text}"
    return r.json() if r.content else None


async def _key(c: httpx.AsyncClient, p: Plant, name: str, tenant: str, role: str,
               level: str = "internal", domains: list[str] | None = None) -> None:
    body = {"tenant_id": tenant, "role": role, "max_data_level": level, "domains": domains,
            "name": name}
    got = await _ok(await c.post("/v1/admin/keys", headers=bearer(p.admin_token), json=body),
                    201)
    p.keys[name], p.key_ids[name] = got["api_key"], got["key_id"]


async def _events(c: httpx.AsyncClient, key: str, session_id: str, user: str,
                  events: list[dict[str, Any]]) -> None:
    await _ok(await c.post(f"/v1/sessions/{session_id}/events", headers=bearer(key),
                           json={"user_id": user, "events": events}), 201)


def _msg(content: str, role: str = "user") -> dict[str, Any]:
    return {"type": "message", "role": role, "content": content}


async def _checkpoint(c: httpx.AsyncClient, key: str, task_id: str, user: str,
                      **body: Any) -> None:
    await _ok(await c.put(f"/v1/tasks/{task_id}/checkpoint", headers=bearer(key),
                          json={"user_id": user, **body}), 200)


async def _doc(c: httpx.AsyncClient, key: str, doc_id: str, text: str, **extra: Any) -> None:
    await _ok(await c.post("/v1/knowledge/documents", headers=bearer(key),
                           json=doc_body(doc_id, text, **extra)), 201)


async def _plant_b(c: httpx.AsyncClient, container: Container, p: Plant) -> None:
    k = p.keys["b_rt"]
    ub = p.mint("B", "b_user")
    sb = p.mint("B", "b_session")
    await _events(c, k, sb, ub, [
        _msg(p.says("B", "b_event_message")),
        {"type": "tool_call", "call_id": "call-1", "name": "lookup",
         "arguments": {"q": p.says("B", "b_event_tool_args")}},
        {"type": "tool_result", "call_id": "call-1", "content": p.says("B", "b_event_result")},
    ])
    # The same session id as A's main session, owned by a user called alice too.
    await _events(c, k, "s-main", "alice", [_msg(p.says("B", "b_main_session"))])
    tb = p.mint("B", "b_task")
    for _ in range(2):
        await _checkpoint(c, k, tb, ub, goal=p.says("B", "b_goal"),
                          constraints=[{"text": p.says("B", "b_constraint"), "kind": "only"}],
                          verified_evidence=[p.says("B", "b_evidence")],
                          accepted_decisions=[p.says("B", "b_decision")],
                          pending_approvals=[p.says("B", "b_approval")])
    for _ in range(3):  # B's t-main has revisions 1..3, A's only 1
        await _checkpoint(c, k, "t-main", "alice", goal=p.says("B", "b_main_goal"))
    docs: dict[str, dict[str, Any]] = {
        "b_doc_all": {},
        "b_doc_acl": {"acl": {"users": ["alice"], "groups": [GROUP]}, "domain": "payments"},
        "b_doc_conf": {"sensitivity": "confidential"},
        "b_doc_secret": {"sensitivity": "secret"},
        "b_doc_expired": {"expires_at": PAST},
    }
    for name, extra in docs.items():
        await _doc(c, k, p.mint("B", name), p.says("B", name + "_text"), **extra)
    await _doc(c, k, "doc-shared", p.says("B", "b_doc_shared_text"))
    b_turn = p.mint("B", "b_turn")
    body = turn_body(p, user=ub, session_id=sb, task_id=tb, data_level="secret",
                     turn_id=b_turn)
    seen = await c.post("/v1/context", headers=bearer(k), json=body)
    assert seen.status_code == 200, seen.text
    # B sees its own canaries: their absence from A's answers is meaningful.
    for name in ("b_event_message", "b_goal", "b_doc_all_text", "b_doc_acl_text"):
        assert p.ids[name] in seen.text, name
    p.b_turn_body = turn_body(p, session_id="s-main", task_id="t-main")
    for turn_id in (f"turn-shared-{p.uid}", f"turn-twin-{p.uid}"):
        r = await c.post("/v1/context", headers=bearer(k),
                         json={**p.b_turn_body, "turn_id": turn_id})
        assert r.status_code == 200, r.text
    # Audit records of B's turns (the permission guard's drops): written by the adapter,
    # since the pushed-down queries leave the guard nothing to drop in a normal turn.
    await container.audit.write(tenant_id=p.tb, records=[
        AuditRecord(turn_id=b_turn, kind="dropped.permission.acl", principal=p.key_ids["b_rt"],
                    ref=f"kb://{p.ids['b_doc_acl']}#v1:c0", rule="user and groups not in the ACL",
                    detail={"kind": "retrieval", "user_id": ub,
                            "note": p.mint("B", "b_audit_detail", is_content=True)}),
        AuditRecord(turn_id=f"turn-shared-{p.uid}", kind="dropped.permission.owner",
                    principal=p.key_ids["b_rt"], ref=f"session://{sb}",
                    rule=p.mint("B", "b_audit_rule", is_content=True), detail={}),
    ])


async def _plant_a(c: httpx.AsyncClient, p: Plant) -> None:
    k, kbob = p.keys["a_rt"], p.keys["a_rt_bob"]
    await _events(c, k, "s-main", "alice", [_msg(p.positive("session")),
                                            _msg("noted", role="assistant")])
    await _events(c, k, f"s-sibling-{p.uid}", "alice", [_msg(p.says("S", "sibling_message"))])
    su = p.mint("U", "bob_session")
    await _events(c, kbob, su, "bob", [
        _msg(p.says("U", "bob_message")),
        {"type": "tool_call", "call_id": "call-b", "name": "lookup",
         "arguments": {"q": p.says("U", "bob_tool_args")}},
        {"type": "tool_result", "call_id": "call-b", "content": p.says("U", "bob_result")}])
    await _checkpoint(c, k, "t-main", "alice", goal=p.positive("goal"))
    tu = p.mint("U", "bob_task")
    await _checkpoint(c, kbob, tu, "bob", goal=p.says("U", "bob_goal"),
                      constraints=[{"text": p.says("U", "bob_constraint"), "kind": "except"}],
                      verified_evidence=[p.says("U", "bob_evidence")])
    await _doc(c, k, "doc-ok", p.positive("doc"))
    await _doc(c, k, "doc-shared", p.positive("doc_shared"))
    await _doc(c, k, p.mint("G", "acl_doc"), p.says("G", "acl_doc_text"),
               acl={"users": ["bob"], "groups": [f"grp-bob-{p.uid}"]})
    await _doc(c, p.keys["a_writer"], p.mint("C", "conf_doc"), p.says("C", "conf_doc_text"),
               sensitivity="confidential")
    await _doc(c, k, p.mint("D", "hr_doc"), p.says("D", "hr_doc_text"), domain="hr")
    await _doc(c, k, p.mint("X", "expired_doc"), p.says("X", "expired_doc_text"),
               expires_at=PAST)
    bob_turn = p.mint("U", "bob_turn")
    r = await c.post("/v1/context", headers=bearer(kbob), json=turn_body(
        p, user="bob", session_id=su, task_id=tu, turn_id=bob_turn,
        groups=[GROUP, f"grp-bob-{p.uid}"]))
    assert r.status_code == 200, r.text
    assert p.ids["bob_message"] in r.text and p.ids["acl_doc_text"] in r.text


async def plant_all(c: httpx.AsyncClient, container: Container, uid: str, *,
                    admin_token: str) -> Plant:
    p = Plant(uid=uid, ta=f"iso-{uid}-a", tb="", bait=f"bait{uid}", admin_token=admin_token)
    p.tb = p.mint("B", "tenant_b")
    await _key(c, p, "a_rt", p.ta, "runtime")
    await _key(c, p, "a_rt_dom", p.ta, "runtime", domains=["payments"])
    await _key(c, p, "a_rt_bob", p.ta, "runtime")
    await _key(c, p, "a_ops", p.ta, "ops")
    await _key(c, p, "a_admin", p.ta, "admin")
    # Writes are capped by the key too: A's confidential canary needs a wider writer key.
    await _key(c, p, "a_writer", p.ta, "runtime", level="confidential")
    await _key(c, p, "a_revoked", p.ta, "runtime")
    await _key(c, p, "a_ops_revoked", p.ta, "ops")
    await _key(c, p, "b_rt", p.tb, "runtime", level="secret")
    await _key(c, p, "b_ops", p.tb, "ops")
    for name in ("a_revoked", "a_ops_revoked"):
        r = await c.delete(f"/v1/admin/keys/{p.key_ids[name]}", headers=bearer(admin_token))
        assert r.status_code == 204, r.text
    await _plant_b(c, container, p)
    await _plant_a(c, p)
    return p
