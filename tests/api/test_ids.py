"""Ids as users have them, end to end on the real stores (issue 16, item 1).

Every id of ``tests.nasty_ids`` is used as a user, a session, a tenant, a document id and a
version label; none shares a tail, a turn, a document or a key with another, however close
(``a:b`` beside ``a%3Ab``, ``a/b`` beside ``a%2Fb``, Latin beside Cyrillic). A path carries an
id percent-encoded, decoded once by the server.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import pytest

from app.core.refs import chunk_ref, doc_ref, parse_ref
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn
from tests.api.test_bad_input import assert_problem
from tests.api.test_identity_visibility import asserted, require_assertions, token
from tests.nasty_ids import NASTY_IDS, NFC_E, NFD_E

DOCS = "/v1/knowledge/documents"
LABELS = ("v3", "6f2d1be", "2026.07.15.3", "release/2026-07", "ü-1")


def in_path(value: str) -> str:
    """``value`` as one path segment: every reserved byte encoded, and the dot segments too,
    which a URL library would otherwise resolve away."""
    seg = quote(value, safe="")
    return seg.replace(".", "%2E") if seg in (".", "..") else seg


def marker(i: int) -> str:
    return f"kestrel{i:02d}quill"


def doc(doc_id: str, text: str, version: Any = "v1", **extra: Any) -> dict[str, Any]:
    return {"doc_id": doc_id, "version": version, "text": text, "domain": "payments",
            "sensitivity": "internal", "trust": "reviewed", "acl": None, **extra}


async def test_sessions_and_turns_keep_every_id_apart(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = bearer(await make_key(tenant))
    for i, sid in enumerate(NASTY_IDS):  # each id is the session and its user
        r = await client.post(f"/v1/sessions/{in_path(sid)}/events", headers=key, json={
            "user_id": sid, "events": [{"type": "message", "role": "user",
                                        "content": f"note {marker(i)}"}]})
        assert r.status_code == 201, (sid, r.text)
        assert r.json() == {"session_id": sid, "seqs": [1]}
    for i, sid in enumerate(NASTY_IDS):
        r = await client.get(f"/v1/sessions/{in_path(sid)}/events", headers=key,
                             params={"user_id": sid})
        assert r.status_code == 200, (sid, r.text)
        assert [e["content"] for e in r.json()["events"]] == [f"note {marker(i)}"], sid
        body = turn(user_id=sid, session_id=sid, groups=[], query="what did I note?")
        r = await client.post("/v1/context", headers=key, json=body)
        assert r.status_code == 200, (sid, r.text)
        text = r.text
        seen = [j for j in range(len(NASTY_IDS)) if marker(j) in text]
        assert seen == [i], (sid, seen)  # its own tail, and no other's
        assert r.json()["manifest"]["session_id"] == sid
        refs = {s["ref"] for s in r.json()["envelope"]["segments"]}
        assert f"session://{quote(sid, safe='')}/events/1" in refs
    # An id and one user's other id that differ by an escaped character: another session.
    r = await client.get(f"/v1/sessions/{in_path('a%3Ab')}/events", headers=key,
                         params={"user_id": "a:b"})
    assert r.status_code == 404


async def test_nfd_and_nfc_are_one_id_and_it_is_echoed_as_nfc(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = bearer(await make_key(tenant))
    r = await client.post(f"/v1/sessions/caf{in_path(NFD_E)}/events", headers=key, json={
        "user_id": f"ren{NFD_E}", "events": [{"type": "message", "role": "user",
                                             "content": "bonjour"}]})
    assert r.status_code == 201 and r.json()["session_id"] == f"caf{NFC_E}"
    r = await client.get(f"/v1/sessions/caf{in_path(NFC_E)}/events", headers=key,
                         params={"user_id": f"ren{NFC_E}"})
    assert [e["content"] for e in r.json()["events"]] == ["bonjour"]


async def test_tenants_that_differ_by_an_escaped_character_share_nothing(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    tenants = (f"{tenant}:x", f"{tenant}%3Ax", f"{tenant}/x", f"{{{tenant}}}")
    keys = [bearer(await make_key(t)) for t in tenants]
    for i, key in enumerate(keys):
        r = await client.post("/v1/sessions/agent:main:discord:channel:123/events",
                              headers=key, json={"user_id": "alice@acme.com", "events": [
                                  {"type": "message", "role": "user", "content": marker(i)}]})
        assert r.status_code == 201, r.text
        r = await client.post(DOCS, headers=key, json=doc("docs/payments/refund.md",
                                                          f"refund {marker(i)}",
                                                          title=f"t{i}"))
        assert r.status_code == 201, r.text
    for i, key in enumerate(keys):
        r = await client.post("/v1/context", headers=key, json=turn(
            user_id="alice@acme.com", session_id="agent:main:discord:channel:123",
            groups=[], query="refund notes"))
        assert r.status_code == 200, r.text
        assert [j for j in range(len(tenants)) if marker(j) in r.text] == [i]
        r = await client.get(f"{DOCS}/{in_path('docs/payments/refund.md')}", headers=key)
        assert r.status_code == 200 and r.json()["title"] == f"t{i}"


async def test_documents_with_nasty_ids_list_get_turn_and_delete(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = bearer(await make_key(tenant))
    ops = bearer(await make_key(tenant, "ops"))
    versions = {d: LABELS[i % len(LABELS)] for i, d in enumerate(NASTY_IDS)}
    items = [doc(d, f"refund runbook {marker(i)}", versions[d], title=f"title {i}")
             for i, d in enumerate(NASTY_IDS)]
    r = await client.post(DOCS, headers=key, json={"items": items})
    assert r.status_code == 201, r.text
    assert [(o["doc_id"], o["version"]) for o in r.json()["items"]] == list(versions.items())

    listed: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 7, **({"cursor": cursor} if cursor else {})}
        r = await client.get(DOCS, headers=ops, params=params)
        assert r.status_code == 200, r.text
        listed += [d["doc_id"] for d in r.json()["documents"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert sorted(listed) == sorted(NASTY_IDS) and len(listed) == len(set(listed))

    for i, d in enumerate(NASTY_IDS):
        r = await client.get(f"{DOCS}/{in_path(d)}", headers=key)
        assert r.status_code == 200, (d, r.text)
        got = r.json()
        assert (got["doc_id"], got["version"], got["revision"], got["versions"],
                got["chunks"], got["title"], got["acl"]) == (d, versions[d], 1, 1, 1,
                                                             f"title {i}", None), d
    for d in ("*", "a:b", "a%3Ab", "a/b", "a%2Fb", "alice", "\u0430lice"):
        i = NASTY_IDS.index(d)
        r = await client.post("/v1/context", headers=key, json=turn(
            query=f"which runbook names {marker(i)}?", groups=[]))
        hit = [s for s in r.json()["envelope"]["segments"]
               if marker(i) in s["content"] and s["kind"] != "query"]
        assert [s["ref"] for s in hit] == [chunk_ref(d, versions[d], 0)], d
        assert parse_ref(hit[0]["ref"])[1][0] == d

    for gone, kept in (("a:b", "a%3Ab"), ("a/b", "a%2Fb"), ("alice", "\u0430lice"),
                       ("*", "a*")):
        assert (await client.delete(f"{DOCS}/{in_path(gone)}", headers=key)).status_code == 204
        assert_problem(await client.get(f"{DOCS}/{in_path(gone)}", headers=key), 404,
                       "not-found")
        assert_problem(await client.delete(f"{DOCS}/{in_path(gone)}", headers=key), 404,
                       "not-found")
        assert (await client.get(f"{DOCS}/{in_path(kept)}", headers=key)).status_code == 200
        word = marker(NASTY_IDS.index(gone))
        r = await client.post("/v1/context", headers=key, json=turn(
            query=f"which runbook names {word}?", groups=[]))
        assert not [s for s in r.json()["envelope"]["segments"]
                    if word in s["content"] and s["kind"] != "query"]
    r = await client.get(DOCS, headers=ops, params={"limit": 200})
    assert len(r.json()["documents"]) == len(NASTY_IDS) - 4
    audit = (await client.get("/v1/audit", headers=ops, params={"limit": 50})).json()
    deleted = [a for a in audit["records"] if a["kind"] == "knowledge.deleted"]
    assert sorted(a["ref"] for a in deleted) == sorted(
        doc_ref(d) for d in ("a:b", "a/b", "alice", "*"))
    assert deleted[0]["detail"] == {"version": versions["*"], "revision": 1, "versions": 1,
                                    "chunks": 1}


async def test_a_doc_id_in_the_path_is_decoded_exactly_once(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = bearer(await make_key(tenant))
    ids = ("a/b", "a%2Fb", "a%252Fb", "../x", "..", ".")
    r = await client.post(DOCS, headers=key, json={"items": [
        doc(d, f"text {i}", title=d) for i, d in enumerate(ids)]})
    assert r.status_code == 201, r.text
    for path, doc_id in (("a%2Fb", "a/b"), ("a/b", "a/b"), ("a%252Fb", "a%2Fb"),
                         ("a%25252Fb", "a%252Fb"), ("..%2Fx", "../x"), ("%2E%2E", ".."),
                         ("%2E", ".")):
        r = await client.get(f"{DOCS}/{path}", headers=key)
        assert r.status_code == 200, (path, r.text)
        assert r.json()["doc_id"] == doc_id == r.json()["title"], path
    assert (await client.delete(f"{DOCS}/a%252Fb", headers=key)).status_code == 204
    left = {d["doc_id"] for d in (await client.get(DOCS, headers=key)).json()["documents"]}
    assert left == set(ids) - {"a%2Fb"}


async def test_versions_are_labels_ordered_by_ingest(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = bearer(await make_key(tenant))
    path = f"{DOCS}/{in_path('https://wiki.acme.com/Refund_Timeout')}"

    async def ingest(version: Any, text: str) -> dict[str, Any]:
        r = await client.post(DOCS, headers=key, json=doc(
            "https://wiki.acme.com/Refund_Timeout", text, version))
        assert r.status_code == 201, r.text
        got = (await client.get(path, headers=key)).json()
        return {k: got[k] for k in ("version", "revision", "versions", "chunks")}

    assert await ingest("v3", "refund timeout first") == {
        "version": "v3", "revision": 1, "versions": 1, "chunks": 1}
    # "6f2d1be" sorts before "v3": ingest order, not the label, makes it current.
    assert await ingest("6f2d1be", "refund timeout second") == {
        "version": "6f2d1be", "revision": 2, "versions": 2, "chunks": 1}
    # Re-ingesting a known version rewrites it in place: idempotent, not a rollback.
    for _ in range(2):
        assert await ingest("v3", "refund timeout first") == {
            "version": "6f2d1be", "revision": 2, "versions": 2, "chunks": 1}
    assert await ingest(7, "refund timeout third") == {
        "version": "7", "revision": 3, "versions": 3, "chunks": 1}
    r = await client.post("/v1/context", headers=key, json=turn(query="refund timeout",
                                                                 groups=[]))
    texts = [s["content"] for s in r.json()["envelope"]["segments"]]
    assert any("third" in t for t in texts) and not any("first" in t or "second" in t
                                                         for t in texts)


async def test_who_may_list_read_and_delete(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        other_tenant: str) -> None:
    runtime = bearer(await make_key(tenant))
    r = await client.post(DOCS, headers=runtime, json={"items": [
        doc("pay", "refund"), doc("hr", "leave", domain="hr"),
        doc("secretish", "salary bands", sensitivity="confidential")]})
    assert r.status_code == 201, r.text
    ops, admin = bearer(await make_key(tenant, "ops")), bearer(await make_key(tenant, "admin"))
    narrow = bearer(await make_key(tenant, domains=["payments"], max_data_level="internal"))
    stranger = bearer(await make_key(other_tenant, "admin"))

    def ids(r: httpx.Response) -> set[str]:
        assert r.status_code == 200, r.text
        return {d["doc_id"] for d in r.json()["documents"]}

    assert ids(await client.get(DOCS, headers=ops)) == {"pay", "hr", "secretish"}
    assert ids(await client.get(DOCS, headers=narrow)) == {"pay"}
    assert ids(await client.get(DOCS, headers=stranger)) == set()
    missing = assert_problem(await client.get(f"{DOCS}/nope", headers=narrow), 404,
                             "not-found")
    for who, d in ((narrow, "hr"), (narrow, "secretish"), (stranger, "pay")):
        body = assert_problem(await client.get(f"{DOCS}/{d}", headers=who), 404, "not-found")
        # another tenant's, or outside the key: as if missing (each answer has its own id)
        assert {**body, "request_id": None} == {**missing, "request_id": None}
        assert_problem(await client.delete(f"{DOCS}/{d}", headers=who), 404, "not-found")
    assert_problem(await client.delete(f"{DOCS}/pay", headers=ops), 403, "forbidden-scope")
    assert (await client.delete(f"{DOCS}/hr", headers=admin)).status_code == 204
    assert (await client.delete(f"{DOCS}/pay", headers=narrow)).status_code == 204
    assert ids(await client.get(DOCS, headers=ops)) == {"secretish"}
    assert_problem(await client.get(DOCS), 401, "unauthorized")


@pytest.mark.parametrize("bad", ["a%00b", "a%07b", "%20a", "a%20", "x" * 257, "a%E2%80%AEb"])
async def test_bad_doc_ids_in_the_path_are_422(client: httpx.AsyncClient,
                                               make_key: KeyMaker, tenant: str,
                                               bad: str) -> None:
    key = bearer(await make_key(tenant))
    for method in ("GET", "DELETE"):
        body = assert_problem(await client.request(method, f"{DOCS}/{bad}", headers=key),
                              422, "invalid-request")
        assert body["errors"][0]["loc"] == ["path", "doc_id"]  # type: ignore[index]


@pytest.mark.parametrize(("field", "value"), [
    ("doc_id", "a\x00b"), ("doc_id", "a\x1bb"), ("doc_id", " a"), ("doc_id", "a" * 257),
    ("version", ""), ("version", "v1\n"), ("version", True), ("version", 1.5),
    ("domain", "pay\tments"),
])
async def test_bad_ids_in_a_document_are_422_and_nothing_is_written(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, field: str,
        value: object) -> None:
    key = bearer(await make_key(tenant))
    r = await client.post(DOCS, headers=key, json={"items": [
        doc("fine", "refund"), {**doc("other", "refund"), field: value}]})
    body = assert_problem(r, 422, "invalid-request")
    assert body["errors"][0]["loc"][:4] == ["body", "items", 1, field]  # type: ignore[index]
    assert (await client.get(DOCS, headers=key)).json()["documents"] == []


@pytest.mark.parametrize("params", [{"cursor": "!!"}, {"cursor": "AA"}, {"limit": 0},
                                    {"limit": 201}])
async def test_bad_list_parameters_are_422(client: httpx.AsyncClient, make_key: KeyMaker,
                                           tenant: str, params: dict[str, Any]) -> None:
    key = bearer(await make_key(tenant))
    assert_problem(await client.get(DOCS, headers=key, params=params), 422, "invalid-request")


async def test_signed_assertions_carry_oidc_subjects_and_group_names(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        admin_headers: dict[str, str]) -> None:
    key = await make_key(tenant)
    r = await client.post(DOCS, headers=bearer(key), json=doc(
        "hr/bonus.md", f"bonus pool {marker(1)}", acl={"groups": ["acme:hr"]}))
    assert r.status_code == 201, r.text
    assert (await require_assertions(client, admin_headers, tenant)).status_code == 204
    # The subject and group arrive in NFD here; the request names them in NFC: one id.
    tok = token(f"auth0|65f0c1-r{NFD_E}", ["acme:hr", f"caf{NFD_E}"])
    r = await client.post("/v1/context", headers=asserted(key, tok), json=turn(
        user_id=f"auth0|65f0c1-r{NFC_E}", groups=[f"caf{NFC_E}"], query="bonus pool"))
    assert r.status_code == 200, r.text
    assert marker(1) in r.text  # the group came from the token
    for bad in (token("auth0|65f0c1", ["a\x00"]), token("auth0|65f0c1", [" hr"])):
        r = await client.post("/v1/context", headers=asserted(key, bad), json=turn(
            user_id="auth0|65f0c1", groups=[]))
        assert_problem(r, 401, "unauthorized")
