"""The attack matrix: every endpoint, as tenant A (and as user alice), with every trick.

``build_cases(plant)`` returns the cases in order (reads of B's ids first, then A's writes
under B's ids, then the reads again). ``run_cases`` sends them and checks each response:

- no canary of a forbidden class in the body or the headers (a token the request itself
  carried, or that A stored under its own tenant with an earlier 2xx write, is an echo);
- every ``tenant_id`` in a JSON body is A's;
- no 5xx; the expected status (guarded modes);
- "forbidden" and "missing" are indistinguishable: a case with a ``twin`` (the same request
  for an id that exists nowhere) must get the same status, problem type and title, and a
  detail equal modulo the requested id;
- ``positives``: A's own content the answer must still hold (guarded modes).
"""

from __future__ import annotations

import json
import logging
import unicodedata
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, unquote

import httpx

from tests.isolation.plant import GROUP, Plant, bearer, doc_body, turn_body

CASE_OPTIONS = frozenset({"allow", "positives", "twin", "subs", "check", "expect_type",
                          "observe"})
PROBLEM = "application/problem+json"
MAX_INT32 = 2**31 - 1

# Not ids at all: refused with 422 before anything is read or written.
BAD_IDS: tuple[tuple[str, str], ...] = (
    ("redis-newline", "s-main\nFLUSHALL"),
    ("oversized", "s" * 10_000),
    ("too-long", "s" * 257),
    ("null-byte", "s-main\x00"),
    ("control", "s-main\x1b[2J"),
    ("bidi-override", "s-main\u202e"),
    ("leading-space", " s-main"),
    ("empty", ""),
)
# Ids as users have them (issue 16): metacharacters of SQL, Redis keys, globs, refs and paths,
# and look-alikes of a planted id. Each is an id of its own, so it must be answered exactly as
# an id nobody used (the case and its twin with a fresh id are indistinguishable): it neither
# reaches the planted rows and keys nor matches them as a pattern.
ODD_IDS: tuple[tuple[str, str], ...] = (
    ("sql-or", "' OR 1=1 --"),
    ("sql-like-percent", "%"),
    ("sql-like-underscore", "_"),
    ("sql-semicolon", "a;DROP TABLE manifests"),
    ("redis-colon", "s-main:tail"),
    ("redis-star", "*"),
    ("redis-glob", "s-[m]ain?"),
    ("redis-braces", "{s-main}"),
    ("ref-forged", "s-main/events/1"),
    ("unicode-cyrillic", "ѕ-main"),
    ("unicode-fullwidth", "ｓ-main"),
    ("unicode-nfd", "s-mai\u0301n"),
    ("traversal", "../s-main"),
    ("traversal-encoded", "..%2Fs-main"),
    ("max-length", "s" * 256),
)
AUTH_VARIANTS: tuple[tuple[str, Callable[[Plant], dict[str, str]]], ...] = (
    ("no-auth", lambda p: {}),
    ("basic-scheme", lambda p: {"Authorization": f"Basic {p.keys['a_rt']}"}),
    ("token-scheme", lambda p: {"Authorization": f"Token {p.keys['a_rt']}"}),
    ("no-scheme", lambda p: {"Authorization": p.keys["a_rt"]}),
    ("bearer-empty", lambda p: {"Authorization": "Bearer "}),
    ("bearer-unknown", lambda p: {"Authorization": "Bearer cgk_not_a_key"}),
    ("bearer-key-suffixed", lambda p: {"Authorization": f"Bearer {p.keys['a_rt']}x"}),
    ("revoked-runtime", lambda p: bearer(p.keys["a_revoked"])),
    ("revoked-ops", lambda p: bearer(p.keys["a_ops_revoked"])),
)


@dataclass
class Case:
    name: str
    method: str
    path: str
    headers: dict[str, str]
    params: dict[str, Any] | None = None
    body: Any = None
    expect: tuple[int, ...] = ()
    expect_type: str | None = None
    allow: frozenset[str] = frozenset()
    positives: tuple[str, ...] = ()
    twin: Case | None = None
    subs: tuple[str, ...] = ()  # values that differ between a case and its twin
    check: Callable[[Any], str | None] | None = None  # extra invariant on the JSON body
    observe: bool = False  # not an attack: a behaviour worth reporting, recorded as is


@dataclass
class Outcome:
    case: str
    status: int
    observe: bool = False
    leaks: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def miss() -> str:
    return f"miss-{uuid.uuid4().hex[:12]}"


def seg(value: str) -> str:
    return quote(value, safe="")


def _seqs(expected: list[int]) -> Callable[[Any], str | None]:
    def check(body: Any) -> str | None:
        got = body.get("seqs") if isinstance(body, dict) else None
        return None if got == expected else f"seqs {got} != {expected} (another tenant's count?)"
    return check


def _revision(expected: int) -> Callable[[Any], str | None]:
    def check(body: Any) -> str | None:
        got = body.get("revision") if isinstance(body, dict) else None
        return None if got == expected else f"revision {got} != {expected}"
    return check


def _event_count(expected: int) -> Callable[[Any], str | None]:
    def check(body: Any) -> str | None:
        got = len(body.get("events", [])) if isinstance(body, dict) else None
        return None if got == expected else f"{got} events != {expected}"
    return check


def _turn_id(expected: str) -> Callable[[Any], str | None]:
    def check(body: Any) -> str | None:
        got = body.get("turn_id") if isinstance(body, dict) else None
        return None if got == expected else f"turn_id {got!r} != {expected!r}"
    return check


def build_cases(p: Plant) -> list[Case]:
    rt, dom, ops, adm = (bearer(p.keys[k]) for k in ("a_rt", "a_rt_dom", "a_ops", "a_admin"))
    ids = p.ids
    sb, ub, tb_task, b_turn = ids["b_session"], ids["b_user"], ids["b_task"], ids["b_turn"]
    su, tu, bob_turn = ids["bob_session"], ids["bob_task"], ids["bob_turn"]
    shared, twin_id = f"turn-shared-{p.uid}", f"turn-twin-{p.uid}"
    cases: list[Case] = []
    add = cases.append

    def turn(name: str, headers: dict[str, str] | None = None, *,
             expect: tuple[int, ...] = (200,), **kw: Any) -> Case:
        opts = {k: v for k, v in kw.items() if k in CASE_OPTIONS}
        extra = {k: v for k, v in kw.items() if k not in CASE_OPTIONS}
        return Case(name, "POST", "/v1/context", headers if headers is not None else rt,
                    body=turn_body(p, **extra), expect=expect, **opts)

    def events(session_id: str, user: str, headers: dict[str, str] | None = None,
               **params: Any) -> Case:
        return Case("", "GET", f"/v1/sessions/{seg(session_id)}/events",
                    headers if headers is not None else rt, params={"user_id": user, **params})

    def checkpoint(task_id: str, headers: dict[str, str] | None = None, **params: Any) -> Case:
        return Case("", "GET", f"/v1/tasks/{seg(task_id)}/checkpoint",
                    headers if headers is not None else rt, params=params or None)

    def named(case: Case, name: str, expect: tuple[int, ...], **kw: Any) -> Case:
        return replace(case, name=name, expect=expect, **kw)

    def pair(name: str, foreign: Case, missing: Case, foreign_id: str, missing_id: str,
             expect: tuple[int, ...], **kw: Any) -> None:
        twin = named(missing, name + "/missing-twin", expect)
        add(named(foreign, name, expect, twin=twin, subs=(foreign_id, missing_id), **kw))

    def odd(name: str, make: Callable[[str], Case], expect: tuple[int, ...],
            longest: int = 256) -> None:
        """``make(id)`` for each of ``ODD_IDS`` (up to ``longest`` characters), twinned
        with ``make(fresh id)``. The server answers with the NFC form of the id."""
        for label, value in ODD_IDS:
            if len(value) > longest:
                continue
            m = miss()
            twin = named(make(m), f"{name}/{label}/missing-twin", expect)
            add(named(make(value), f"{name}/{label}", expect, twin=twin,
                      subs=(unicodedata.normalize("NFC", value), value, m)))

    # --- 1. reads of B's (and bob's) ids, before A writes anything under them ------------
    m = miss()
    pair("sessions/get/b-session-as-b-user", events(sb, ub), events(m, ub), sb, m, (404,))
    m = miss()
    pair("sessions/get/b-session-as-alice", events(sb, "alice"), events(m, "alice"), sb, m,
         (404,))
    add(named(events("s-main", "alice"), "sessions/get/collided-id-own", (200,),
              positives=("session",)))
    m = miss()
    pair("sessions/get/bob-session-as-alice", events(su, "alice"), events(m, "alice"), su, m,
         (404,))
    add(named(events("s-main", ub), "sessions/get/own-session-as-b-user", (404,)))
    add(named(events("s-main", "alice", after_seq=-1), "sessions/get/after-seq-negative",
              (422,)))
    for limit in (0, 501, -1):
        add(named(events("s-main", "alice", limit=limit), f"sessions/get/limit-{limit}",
                  (422,)))
    for label, bad in BAD_IDS:
        add(named(events("s-main", bad), f"sessions/get/user-id/{label}", (422,)))
        add(named(events(bad, "alice"), f"sessions/get/session-id/{label}", (404, 405, 422)))
    odd("sessions/get/user-id", lambda v: events("s-main", v), (404,))
    odd("sessions/get/session-id", lambda v: events(v, "alice"), (404,))
    for who, h in (("ops", ops), ("admin", adm)):
        add(named(events("s-main", "alice", h), f"sessions/get/role-{who}", (403,),
                  expect_type="forbidden-scope"))

    for who, h in (("runtime", rt), ("ops", ops), ("admin", adm)):
        m = miss()
        as_user = {"user_id": "alice"} if who == "runtime" else {}
        pair(f"tasks/get/b-task/{who}", checkpoint(tb_task, h, **as_user),
             checkpoint(m, h, **as_user), tb_task, m, (404,))
    m = miss()
    pair("tasks/get/b-task-as-b-user", checkpoint(tb_task, user_id=ub),
         checkpoint(m, user_id=ub), tb_task, m, (404,))
    add(named(checkpoint("t-main", user_id="alice"), "tasks/get/collided-id-own", (200,),
              positives=("goal",), check=_revision(1)))
    pair("tasks/get/collided-id-b-revision",
         checkpoint("t-main", revision=2, user_id="alice"),
         checkpoint("t-main", revision=57, user_id="alice"), "revision 2", "revision 57",
         (404,))
    m = miss()
    pair("tasks/get/bob-task-as-alice", checkpoint(tu, user_id="alice"),
         checkpoint(m, user_id="alice"), tu, m, (404,))
    add(named(checkpoint("t-main", revision=0), "tasks/get/revision-0", (422,)))
    for label, bad in BAD_IDS:
        add(named(checkpoint(bad), f"tasks/get/task-id/{label}", (404, 405, 422)))
        add(named(checkpoint("t-main", user_id=bad), f"tasks/get/user-id/{label}", (422,)))
    odd("tasks/get/task-id", lambda v: checkpoint(v, user_id="alice"), (404,))
    odd("tasks/get/user-id", lambda v: checkpoint("t-main", user_id=v), (404,))

    def manifest(turn_id: str, h: dict[str, str]) -> Case:
        return Case("", "GET", f"/v1/manifests/{seg(turn_id)}", h)

    for who, h in (("runtime", rt), ("ops", ops), ("admin", adm)):
        for label, foreign in (("b-turn", b_turn), ("collided-turn", shared)):
            m = miss()
            pair(f"manifests/get/{label}/{who}", manifest(foreign, h), manifest(m, h),
                 foreign, m, (404,))
    m = miss()
    pair("manifests/get/bob-turn-by-alice-key", manifest(bob_turn, rt), manifest(m, rt),
         bob_turn, m, (404,))
    add(named(manifest(bob_turn, ops), "manifests/get/bob-turn-by-ops", (200,),
              allow=frozenset("UG")))
    for label, bad in BAD_IDS:
        add(named(manifest(bad, ops), f"manifests/get/turn-id/{label}", (307, 404, 405, 422)))
    odd("manifests/get/turn-id", lambda v: manifest(v, ops), (404,))

    def explain(turn_id: str, ref: str, h: dict[str, str]) -> Case:
        return Case("", "GET", f"/v1/manifests/{seg(turn_id)}/explain", h,
                    params={"ref": ref})

    # Explain re-evaluates a source outside the manifest: B's turns and B's sources must be
    # as missing as ids that never existed, to every key of A.
    for who, h in (("ops", ops), ("admin", adm)):
        m = miss()
        pair(f"explain/b-turn/{who}", explain(b_turn, "kb://doc-ok", h),
             explain(m, "kb://doc-ok", h), b_turn, m, (404,))
        for name in ("b_doc_all", "b_doc_acl", "b_doc_conf", "b_session", "b_task"):
            scheme = {"b_session": "session", "b_task": "task"}.get(name, "kb")
            m = miss()
            pair(f"explain/b-source-{name}/{who}",
                 explain(bob_turn, f"{scheme}://{ids[name]}", h),
                 explain(bob_turn, f"{scheme}://{m}", h), ids[name], m, (404,))
    m = miss()
    pair("explain/bob-turn-by-alice-key", explain(bob_turn, "kb://doc-ok", rt),
         explain(m, "kb://doc-ok", rt), bob_turn, m, (404,))
    add(named(explain(bob_turn, f"kb://{ids['acl_doc']}", ops), "explain/bob-turn-g-doc",
              (200,), allow=frozenset("UG")))
    add(named(explain(bob_turn, "kb://doc-shared", ops), "explain/bob-turn-collided-doc",
              (200,), allow=frozenset("UG")))

    def listing(h: dict[str, str], **params: Any) -> Case:
        return Case("", "GET", "/v1/manifests", h, params=params or None)

    listing_cases: list[Case] = []
    for who, h, allow in (("runtime", rt, frozenset()), ("ops", ops, frozenset("UG")),
                          ("admin", adm, frozenset("UG"))):
        for label, params in (("all", {"limit": 200}), ("b-session", {"session_id": sb}),
                              ("b-task", {"task_id": tb_task}),
                              ("collided-session", {"session_id": "s-main"}),
                              ("collided-task", {"task_id": "t-main"}),
                              ("bob-session", {"session_id": su}),
                              ("before-future", {"before": "2999-01-01T00:00:00+00:00"})):
            listing_cases.append(named(listing(h, **params), f"manifests/list/{label}/{who}",
                                       (200,), allow=allow))
    cases += listing_cases
    for label, bad in BAD_IDS:
        add(named(listing(ops, session_id=bad), f"manifests/list/session-id/{label}", (422,)))
        add(named(listing(ops, task_id=bad), f"manifests/list/task-id/{label}", (422,)))
    odd("manifests/list/session-id", lambda v: listing(ops, session_id=v), (200,))
    odd("manifests/list/task-id", lambda v: listing(ops, task_id=v), (200,))
    for label, bad in (("sql-or", "' OR 1=1 --"), ("percent", "%"), ("oversized", "9" * 10_000),
                       ("null-byte", "2026\x00"), ("semicolon", "2026-01-01; SELECT 1")):
        add(named(listing(ops, before=bad), f"manifests/list/before/{label}", (422,)))
    for limit in (0, 201):
        add(named(listing(ops, limit=limit), f"manifests/list/limit-{limit}", (422,)))

    def audit(h: dict[str, str], **params: Any) -> Case:
        return Case("", "GET", "/v1/audit", h, params=params or None)

    audit_cases: list[Case] = []
    for who, h in (("ops", ops), ("admin", adm)):
        # A record names its turn: bob's turn id (a U canary), which these keys list anyway
        # (manifests/list/all) — since every turn writes its permission counts.
        audit_cases.append(named(audit(h, limit=1000), f"audit/all/{who}", (200,),
                                 allow=frozenset("U")))
        for label, foreign in (("b-turn", b_turn), ("collided-turn", shared)):
            m = miss()
            foreign_case = named(audit(h, turn_id=foreign), f"audit/{label}/{who}", (200,))
            audit_cases.append(replace(
                foreign_case, twin=named(audit(h, turn_id=m), f"audit/{label}/{who}/twin",
                                         (200,)), subs=(foreign, m)))
    cases += audit_cases
    add(named(audit(rt), "audit/role-runtime", (403,), expect_type="forbidden-scope"))
    for label, bad in BAD_IDS:
        add(named(audit(ops, turn_id=bad), f"audit/turn-id/{label}", (422,)))
    odd("audit/turn-id", lambda v: audit(ops, turn_id=v), (200,))
    for limit in (0, 1001):
        add(named(audit(ops, limit=limit), f"audit/limit-{limit}", (422,)))

    # --- 2. turns: B's ids, B's groups, scope escalation, metacharacters ----------------
    add(turn("context/baseline", session_id="s-main", task_id="t-main",
             positives=("session", "goal", "doc", "doc_shared")))
    add(turn("context/claims-b-acl-group-and-user", session_id="s-main",
             groups=[GROUP, "payments", "grp-b"], positives=("doc",)))
    m = miss()
    add(turn("context/b-session-as-alice", session_id=sb, positives=("doc",),
             twin=turn("context/b-session-as-alice/twin", session_id=m), subs=(sb, m)))
    m = miss()
    add(turn("context/b-session-as-b-user", user=ub, session_id=sb, task_id=tb_task,
             twin=turn("context/b-session-as-b-user/twin", user=ub, session_id=m,
                       task_id=m), subs=(sb, tb_task, m)))
    m = miss()
    add(turn("context/b-task-as-alice", task_id=tb_task,
             twin=turn("context/b-task-as-alice/twin", task_id=m), subs=(tb_task, m)))
    add(turn("context/bob-session-as-alice", session_id=su, expect=(404,),
             expect_type="not-found"))
    add(turn("context/bob-task-as-alice", task_id=tu, expect=(404,), expect_type="not-found"))
    add(turn("context/sibling-session-not-mixed-in", session_id="s-main",
             positives=("session",)))
    add(turn("context/b-turn-id-for-a-turn", session_id="s-main", turn_id=b_turn,
             positives=("session",), check=_turn_id(b_turn)))
    add(turn("context/collided-turn-id-own-body", session_id="s-main", turn_id=shared,
             positives=("session",)))
    add(Case("context/collided-turn-id-b-exact-body", "POST", "/v1/context", rt,
             body={**p.b_turn_body, "turn_id": twin_id}, expect=(200,),
             positives=("session", "goal")))
    add(turn("context/own-tenant-claim", tenant_id=p.ta, positives=("doc",)))
    add(turn("context/b-tenant-claim", tenant_id=p.tb, expect=(403,),
             expect_type="forbidden-scope"))
    add(turn("context/b-tenant-claim-lowercase", tenant_id=p.tb.lower(), expect=(403,),
             expect_type="forbidden-scope"))
    # Look-alikes are other tenants' names, not the key's.
    add(turn("context/own-tenant-claim-cyrillic", tenant_id=p.ta.replace("a", "а"),
             expect=(403,), expect_type="forbidden-scope"))
    add(turn("context/b-tenant-claim-fullwidth", tenant_id="ＣＡＮＡＲＹ" + p.tb[6:],
             expect=(403,), expect_type="forbidden-scope"))
    for level in ("confidential", "secret"):
        add(turn(f"context/data-level-{level}-above-key", data_level=level, expect=(403,),
                 expect_type="forbidden-scope"))
    add(turn("context/domain-outside-restricted-key", dom, domain="hr", expect=(403,),
             expect_type="forbidden-scope"))
    add(turn("context/no-domain-on-restricted-key", dom, domain=None, expect=(403,),
             expect_type="forbidden-scope"))
    add(turn("context/restricted-key-own-domain", dom, positives=("doc",)))
    add(turn("context/no-domain", domain=None, positives=("doc",)))
    for field_name in ("session_id", "task_id", "turn_id", "user_id", "domain",
                       "redaction_profile"):
        for label, bad in BAD_IDS:
            if field_name == "user_id":
                add(turn(f"context/{field_name}/{label}", user=bad, expect=(422,)))
            else:
                patch: dict[str, Any] = {field_name: bad}
                add(turn(f"context/{field_name}/{label}", expect=(422,), **patch))
    for label, bad in BAD_IDS:
        add(turn(f"context/groups/{label}", groups=[GROUP, bad], expect=(422,)))
    for field_name, status in (("session_id", 200), ("task_id", 200), ("turn_id", 200),
                               ("domain", 200), ("redaction_profile", 422)):
        def one_field(v: str, f: str = field_name) -> Case:
            patch: dict[str, Any] = {f: v}
            return turn("", **patch)
        odd(f"context/{field_name}", one_field, (status,))
    odd("context/user_id", lambda v: turn("", user=v), (200,))
    odd("context/groups", lambda v: turn("", groups=[GROUP, v]), (200,))
    add(turn("context/groups-oversized-list", groups=[f"g{i}" for i in range(5000)],
             expect=(413, 422)))
    for label, query in (
            ("sql", f"' OR 1=1 -- ; DROP TABLE knowledge_chunks; {p.bait}"),
            ("like", f"% _ %% {p.bait}"),
            ("tsquery-operators", f"{p.bait} | canary:* & !refund <-> (x"),
            ("redis", f"* {{s-main}} : \n {p.bait}"),
            ("unicode", f"ｒｅｆｕｎｄ ѕ-main {p.bait}"),
            ("null-byte", f"refund\x00 {p.bait}"),
            ("canary-prefix", f"CANARY B canary-b {p.bait}")):
        add(turn(f"context/query/{label}", query=query, positives=("doc",), expect=(200, 422)))
    add(turn("context/query-embedding-wrong-dim", query_embedding=[0.1] * 10, expect=(422,)))
    add(turn("context/acl-claimed-in-turn-body", acl={"users": [ub]}, expect=(422,)))

    # --- 3. writes under B's ids (A's own rows; never B's) ------------------------------
    def append(session_id: str, h: dict[str, str], **body: Any) -> Case:
        payload = {"user_id": "alice",
                   "events": [{"type": "message", "role": "user", "content": "a writes"}],
                   **body}
        return Case("", "POST", f"/v1/sessions/{seg(session_id)}/events", h, body=payload)

    add(named(append(sb, rt), "sessions/append/b-session-id", (201,), check=_seqs([1])))
    add(named(append(su, rt), "sessions/append/bob-session-as-alice", (404,),
              expect_type="not-found"))
    add(named(append("s-main", rt, tenant_id=p.tb), "sessions/append/b-tenant-claim", (403,),
              expect_type="forbidden-scope"))
    add(named(append(f"s-child-{p.uid}", rt, parent_session_id=sb, agent_id=ub),
              "sessions/append/b-parent-and-agent", (201,), check=_seqs([1])))
    for who, h in (("ops", ops), ("admin", adm)):
        add(named(append("s-main", h), f"sessions/append/role-{who}", (403,),
                  expect_type="forbidden-scope"))
    for label, bad in BAD_IDS:
        add(named(append(bad, rt), f"sessions/append/session-id/{label}", (404, 405, 422)))
        add(named(append("s-main", rt, user_id=bad), f"sessions/append/user-id/{label}",
                  (422,)))
        add(named(append("s-main", rt, parent_session_id=bad),
                  f"sessions/append/parent-id/{label}", (422,)))
    odd("sessions/append/session-id", lambda v: append(v, rt), (201,))
    odd("sessions/append/user-id", lambda v: append("s-main", rt, user_id=v), (404,))
    odd("sessions/append/parent-id", lambda v: append(f"s-child-{v}", rt, parent_session_id=v),
        (201,), longest=240)

    def put(task_id: str, h: dict[str, str], **body: Any) -> Case:
        payload = {"user_id": "alice", "goal": "a's goal", **body}
        return Case("", "PUT", f"/v1/tasks/{seg(task_id)}/checkpoint", h, body=payload)

    add(named(put(tb_task, rt), "tasks/put/b-task-id", (200,), check=_revision(1)))
    add(named(put("t-main", rt, expected_revision=3), "tasks/put/b-latest-revision", (409,),
              twin=named(put("t-main", rt, expected_revision=9),
                         "tasks/put/b-latest-revision/twin", (409,)),
              subs=("revision 3", "revision 9")))
    add(named(put(tu, rt), "tasks/put/bob-task-as-alice", (404,), expect_type="not-found"))
    add(named(put("t-main", rt, tenant_id=p.tb), "tasks/put/b-tenant-claim", (403,),
              expect_type="forbidden-scope"))
    for who, h in (("ops", ops), ("admin", adm)):
        add(named(put("t-main", h), f"tasks/put/role-{who}", (403,),
                  expect_type="forbidden-scope"))
    for label, bad in BAD_IDS:
        add(named(put(bad, rt), f"tasks/put/task-id/{label}", (404, 405, 422)))
        add(named(put("t-main", rt, user_id=bad), f"tasks/put/user-id/{label}", (422,)))
    odd("tasks/put/task-id", lambda v: put(v, rt), (200,))
    odd("tasks/put/user-id", lambda v: put("t-main", rt, user_id=v), (404,))

    def ingest(h: dict[str, str], doc_id: str, **extra: Any) -> Case:
        return Case("", "POST", "/v1/knowledge/documents", h,
                    body=doc_body(doc_id, f"A's own text {p.bait}", **extra))

    add(named(ingest(rt, ids["b_doc_all"]), "knowledge/ingest/b-doc-id", (201,)))
    add(named(ingest(rt, "doc-new", tenant_id=p.tb), "knowledge/ingest/b-tenant-claim",
              (403,), expect_type="forbidden-scope"))
    for who, h in (("ops", ops), ("admin", adm)):
        add(named(ingest(h, "doc-new"), f"knowledge/ingest/role-{who}", (403,),
                  expect_type="forbidden-scope"))
    for label, bad in BAD_IDS:
        add(named(ingest(rt, bad), f"knowledge/ingest/doc-id/{label}", (422,)))
        add(named(ingest(rt, "doc-new", acl={"users": [], "groups": [bad]}),
                  f"knowledge/ingest/acl-group/{label}", (422,)))
        add(named(ingest(rt, "doc-new", domain=bad), f"knowledge/ingest/domain/{label}",
                  (422,)))
    odd("knowledge/ingest/doc-id", lambda v: ingest(rt, v), (201,))
    odd("knowledge/ingest/acl-group", lambda v: ingest(rt, f"doc-{v}",
                                                       acl={"users": [], "groups": [v]}),
        (201,), longest=240)
    odd("knowledge/ingest/domain", lambda v: ingest(rt, f"doc-{v}", domain=v), (201,),
        longest=240)

    # --- 4. the reads again, after A stored rows under B's ids -------------------------
    add(named(events(sb, "alice"), "sessions/get/b-session-id-after-a-wrote", (200,),
              check=_event_count(1)))
    add(named(checkpoint(tb_task, user_id="alice"), "tasks/get/b-task-id-after-a-wrote",
              (200,), check=_revision(1)))
    add(named(manifest(b_turn, ops), "manifests/get/b-turn-id-after-a-used-it", (200,),
              check=_turn_id(b_turn)))
    add(turn("context/b-session-id-after-a-wrote", session_id=sb, task_id=tb_task,
             positives=("doc",)))
    add(turn("context/child-of-b-session", session_id=f"s-child-{p.uid}", positives=("doc",)))
    # After A's own turns took B's turn ids, the audit answers A's records of them (each turn
    # writes its permission counts): nothing left to compare with a missing id, only leaks.
    cases += [replace(c, name=c.name + "/after-writes", twin=None)
              for c in listing_cases + audit_cases]

    # --- 5. keys, schemes and roles on every endpoint -----------------------------------
    endpoints: list[tuple[str, str, str, Any]] = [
        ("context", "POST", "/v1/context", turn_body(p, session_id="s-main")),
        ("append", "POST", "/v1/sessions/s-main/events",
         {"user_id": "alice", "events": [{"type": "message", "role": "user", "content": "x"}]}),
        ("events", "GET", "/v1/sessions/s-main/events?user_id=alice", None),
        ("put", "PUT", "/v1/tasks/t-main/checkpoint", {"user_id": "alice", "goal": "g"}),
        ("checkpoint", "GET", "/v1/tasks/t-main/checkpoint", None),
        ("ingest", "POST", "/v1/knowledge/documents", doc_body("doc-auth", "x")),
        ("manifest", "GET", f"/v1/manifests/{b_turn}", None),
        ("manifests", "GET", f"/v1/manifests?session_id={sb}", None),
        ("audit", "GET", f"/v1/audit?turn_id={b_turn}", None),
        ("create-key", "POST", "/v1/admin/keys",
         {"tenant_id": p.tb, "role": "admin", "max_data_level": "secret"}),
        ("revoke-key", "DELETE", f"/v1/admin/keys/{p.key_ids['b_rt']}", None),
        ("list-keys", "GET", f"/v1/admin/keys?tenant_id={p.tb}", None),
    ]
    for ep, method, path, body in endpoints:
        for variant, headers in AUTH_VARIANTS:
            add(Case(f"auth/{ep}/{variant}", method, path, headers(p), body=body,
                     expect=(401,), expect_type="unauthorized"))
        if ep in ("create-key", "revoke-key", "list-keys"):
            for who in ("a_rt", "a_ops", "a_admin", "b_rt"):
                add(Case(f"auth/{ep}/tenant-key-{who}", method, path, bearer(p.keys[who]),
                         body=body, expect=(401,), expect_type="unauthorized"))
        else:
            add(Case(f"auth/{ep}/platform-token-as-tenant-key", method, path,
                     bearer(p.admin_token), body=body, expect=(401,),
                     expect_type="unauthorized"))
    for ep, method, path, body in endpoints[:6]:
        if ep not in ("events", "checkpoint"):
            for who in ("a_ops", "a_admin"):
                add(Case(f"roles/{ep}/{who}", method, path, bearer(p.keys[who]), body=body,
                         expect=(403,), expect_type="forbidden-scope"))
    for ep, method, path, _ in endpoints[6:9]:
        expect = (403,) if ep == "audit" else (200,)  # A made a turn under B's turn id
        add(Case(f"roles/{ep}/a_rt", method, path, rt, expect=expect))

    # --- 6. traversal in raw paths, health and metrics -----------------------------------
    for label, path in (
            ("sessions", f"/v1/sessions/..%2F{sb}/events?user_id={ub}"),
            ("sessions-dots", f"/v1/sessions/%2E%2E%2F%2E%2E%2Fv1%2Fsessions%2F{sb}/events"
                              f"?user_id={ub}"),
            ("tasks", f"/v1/tasks/..%2F..%2Ftasks%2F{tb_task}/checkpoint"),
            ("manifests", f"/v1/manifests/..%2F..%2Fmanifests%2F{b_turn}"),
            ("manifests-double-encoded", f"/v1/manifests/%252E%252E%252F{b_turn}"),
            ("admin", "/v1/manifests/..%2F..%2Fadmin%2Fkeys"),
            ("null-byte", f"/v1/manifests/{b_turn}%00"),
    ):
        add(Case(f"traversal/{label}", "GET", path, ops if "manifests" in path else rt,
                 expect=(404, 405, 422)))

    # --- 7. observations (reported, not asserted), groups widen inside tenant A only -----
    # Formerly observations, now enforced: a runtime key must name the task's user, and a
    # key can only write what it could read.
    add(named(checkpoint(tu), "tasks/get/runtime-without-user-id", (422,)))
    add(named(ingest(dom, "doc-obs-hr", domain="hr"),
              "knowledge/ingest-domain-outside-restricted-key", (403,)))
    add(named(ingest(rt, "doc-obs-secret", sensitivity="secret"),
              "knowledge/ingest-sensitivity-above-key", (403,)))
    m = miss()
    add(turn("observe/turn-on-bob-session-vs-missing", session_id=su, expect=(),
             observe=True, twin=turn("observe/turn-on-missing-session", session_id=m,
                                     expect=(), observe=True)))
    # groups claimed in the body widen inside tenant A (G allowed here), then health
    def holds_group_doc(body: Any) -> str | None:
        return None if ids["acl_doc_text"] in json.dumps(body) else \
            "a group claimed in the body did not widen inside the tenant"

    add(turn("context/claims-bob-group-widens-in-tenant",
             groups=[GROUP, f"grp-bob-{p.uid}"], allow=frozenset("G"),
             positives=("doc",), check=holds_group_doc))
    for path in ("/healthz", "/readyz", "/metrics"):
        add(Case(f"health{path}", "GET", path, {}, expect=(200,)))
    return cases


def log_text(record: logging.LogRecord) -> str:
    try:
        message = record.getMessage()
    except (TypeError, ValueError):
        message = f"{record.msg} {record.args}"
    if record.exc_info:
        message += logging.Formatter().formatException(record.exc_info)
    return message.lower()


def _json(r: httpx.Response) -> Any:
    try:
        return r.json()
    except ValueError:
        return None


def _tenant_ids(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "tenant_id":
                yield v
            yield from _tenant_ids(v)
    elif isinstance(value, list):
        for v in value:
            yield from _tenant_ids(v)


def request_text(case: Case) -> str:
    parts = [case.method, unquote(case.path), json.dumps(case.params, ensure_ascii=False),
             json.dumps(case.body, ensure_ascii=False), json.dumps(case.headers)]
    return "\n".join(parts).lower()


def _normalized(r: httpx.Response, subs: tuple[str, ...]) -> Any:
    body = _json(r)
    if isinstance(body, dict) and "envelope" in body:
        return [(s["section"], s["kind"]) for s in body["envelope"]["segments"]]
    raw = r.text
    for value in sorted(subs, key=len, reverse=True):
        raw = raw.replace(value, "ID")
    return raw


def indistinguishable(a: httpx.Response, b: httpx.Response, subs: tuple[str, ...]
                      ) -> str | None:
    if a.status_code != b.status_code:
        return f"status {a.status_code} vs missing {b.status_code}"
    ja, jb = _json(a), _json(b)
    if a.headers.get("content-type", "").startswith(PROBLEM):
        assert isinstance(ja, dict) and isinstance(jb, dict)
        for k in ("type", "title"):
            if ja.get(k) != jb.get(k):
                return f"{k} {ja.get(k)!r} vs missing {jb.get(k)!r}"
        da, db = str(ja.get("detail")), str(jb.get("detail"))
        for value in sorted(subs, key=len, reverse=True):
            # A detail quotes an id with repr(), whose quotes depend on the id.
            da, db = (d.replace(repr(value), "ID").replace(value, "ID") for d in (da, db))
        return None if da == db else f"detail {da!r} vs missing {db!r}"
    if _normalized(a, subs) != _normalized(b, subs):
        return "2xx bodies differ beyond the requested id"
    return None


@dataclass
class Runner:
    plant: Plant
    guarded: bool
    adopted: set[str] = field(default_factory=set)
    outcomes: list[Outcome] = field(default_factory=list)
    observations: dict[str, str] = field(default_factory=dict)
    records: list[logging.LogRecord] | None = None  # caplog's list, scanned per case
    log_leaks: list[str] = field(default_factory=list)

    def scan_logs(self, case: Case, start: int) -> None:
        """Content canaries forbidden for ``case`` in the log records it caused."""
        if self.records is None:
            return
        tokens = [t for t in self.forbidden(case) if t in self.plant.content]
        for record in self.records[start:]:
            line = log_text(record)
            for t in tokens:
                if t.lower() not in line:
                    continue
                cls = self.plant.classes[t]
                self.log_leaks.append(
                    f"{case.name} -> {record.name}: {cls}:{self.plant.name_of(t)}")

    def forbidden(self, case: Case) -> list[str]:
        sent = request_text(case)
        return [t for t, cls in self.plant.classes.items()
                if cls not in case.allow and t.lower() not in sent and t not in self.adopted]

    def scan(self, case: Case, r: httpx.Response) -> list[str]:
        haystack = (r.text + "\n" + "\n".join(f"{k}: {v}" for k, v in r.headers.items())
                    ).lower()
        leaks = [t for t in self.forbidden(case) if t.lower() in haystack]
        for tenant in _tenant_ids(_json(r)):
            if tenant != self.plant.ta:
                leaks.append(f"tenant_id={tenant}")
        return leaks

    async def send(self, client: httpx.AsyncClient, case: Case) -> httpx.Response:
        return await client.request(case.method, case.path, headers=case.headers,
                                    params=case.params, json=case.body)

    async def run_one(self, client: httpx.AsyncClient, case: Case) -> httpx.Response:
        start = len(self.records) if self.records is not None else 0
        r = await self.send(client, case)
        self.scan_logs(case, start)
        if case.observe:
            owned = {self.plant.classes[t] for t in self.plant.content if t in r.text}
            self.observations[case.name] = f"{r.status_code}" + (
                f", returns content of class {sorted(owned)}" if owned else "")
        out = Outcome(case.name, r.status_code, case.observe, leaks=self.scan(case, r))
        if r.status_code >= 500:
            out.problems.append(f"5xx: {r.text[:200]}")
        if self.guarded and not case.observe:
            if case.expect and r.status_code not in case.expect:
                out.problems.append(f"status {r.status_code} not in {case.expect}: "
                                    f"{r.text[:200]}")
            body = _json(r)
            if case.expect_type and (not isinstance(body, dict)
                                     or body.get("type") != case.expect_type):
                out.problems.append(f"type {body!r:.120} != {case.expect_type}")
            for name in case.positives if 200 <= r.status_code < 300 else ():
                if self.plant.ok[name] not in r.text:
                    out.problems.append(f"own content {name!r} missing (vacuous pass?)")
            if case.check is not None and 200 <= r.status_code < 300 and (
                    msg := case.check(body)) is not None:
                out.problems.append(msg)
        self.outcomes.append(out)
        if case.method in ("POST", "PUT", "DELETE") and 200 <= r.status_code < 300:
            sent = request_text(case)
            self.adopted |= {t for t in self.plant.classes if t.lower() in sent}
        return r

    async def run(self, client: httpx.AsyncClient, cases: list[Case]) -> None:
        for case in cases:
            r = await self.run_one(client, case)
            if case.twin is not None:
                t = await self.run_one(client, case.twin)
                if not self.guarded or case.observe:
                    continue
                if (msg := indistinguishable(r, t, case.subs)) is not None:
                    self.outcomes[-1].problems.append(f"existence oracle: {msg}")
