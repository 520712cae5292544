"""Recall across sessions (issue 17, item 5) over the API on the real stores: a brand-new
session recalls the user's earlier ones by meaning within the visibility the tenant and the
key allow, never another user's; what the user states about themselves becomes a memory
candidate that the write gate decides on."""

from __future__ import annotations

from typing import Any

import httpx

from app.core.refs import event_ref
from app.main import Container
from tests.api.conftest import KeyMaker, bearer

# No word in common with the question below: only meaning connects them.
PET = "We adopted a beagle puppy named Biscuit last spring."
QUESTION = "what did we call our new pet?"
CHATTER = ["Morning! Quick one before standup.", "Sure, go ahead.",
           "The quarterly report looks fine to me.", "Great, thanks for checking."]


async def say(client: httpx.AsyncClient, key: str, session_id: str, user: str,
              *texts: str) -> list[int]:
    events = [{"type": "message", "role": "user" if i % 2 == 0 else "assistant", "content": t}
              for i, t in enumerate(texts)]
    r = await client.post(f"/v1/sessions/{session_id}/events", headers=bearer(key),
                          json={"user_id": user, "events": events})
    assert r.status_code == 201, r.text
    return list(r.json()["seqs"])


async def ask(client: httpx.AsyncClient, key: str, session_id: str | None, user: str = "alice",
              **extra: Any) -> httpx.Response:
    body: dict[str, Any] = {"user_id": user, "query": QUESTION, "data_level": "internal",
                            "budget": {"max_tokens": 4000, "reserve_output": 500}, **extra}
    if session_id is not None:
        body["session_id"] = session_id
    r = await client.post("/v1/context", headers=bearer(key), json=body)
    assert r.status_code == 200, r.text
    return r


async def set_default(client: httpx.AsyncClient, admin: dict[str, str], tenant: str,
                      visibility: str) -> None:
    r = await client.put(f"/v1/admin/tenants/{tenant}/settings", headers=admin,
                         json={"default_session_visibility": visibility})
    assert r.status_code == 204, r.text
    got = await client.get(f"/v1/admin/tenants/{tenant}/settings", headers=admin)
    assert got.json()["default_session_visibility"] == visibility


async def earlier_sessions(client: httpx.AsyncClient, key: str, container: Container) -> str:
    """Alice's pet story among chatter, and Bob's identical story; embedded before returning."""
    await say(client, key, "bob-old", "bob", PET, "Cute!")
    await say(client, key, "old-chat", "alice", *CHATTER)
    seqs = await say(client, key, "old-pet", "alice", PET, "Lovely name.")
    await container.recall.idle()
    return event_ref("old-pet", seqs[0])


async def test_a_new_session_recalls_an_earlier_one_by_meaning(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        admin_headers: dict[str, str], container: Container) -> None:
    key = await make_key(tenant, max_session_visibility="all")
    pet = await earlier_sessions(client, key, container)
    await set_default(client, admin_headers, tenant, "all")

    first_turn = await ask(client, key, "brand-new")
    assert pet in first_turn.text
    assert event_ref("bob-old", 1) not in first_turn.text  # never another user's
    # A stateless turn (no session) opens the user's sessions too under ``all``.
    assert pet in (await ask(client, key, None)).text
    manifest = first_turn.json()["manifest"]
    [segment] = [s for s in manifest["segments"] if s["ref"] == pet]
    assert "transcript_vector#" in segment["reason"]


async def test_the_fail_closed_default_and_the_key_cap_hold(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        admin_headers: dict[str, str], container: Container) -> None:
    wide = await make_key(tenant, max_session_visibility="all")
    narrow = await make_key(tenant, max_session_visibility="tree")
    pet = await earlier_sessions(client, wide, container)

    # Without a tenant default a turn reads its own session tree: a new one recalls nothing.
    assert pet not in (await ask(client, wide, "new-1")).text
    # Asking explicitly works within the key's cap...
    assert pet in (await ask(client, wide, "new-2", session_visibility="all")).text
    # ...and a tenant default wider than a key's cap is capped, not an error.
    await set_default(client, admin_headers, tenant, "all")
    assert pet not in (await ask(client, narrow, "new-3")).text
    assert pet in (await ask(client, wide, "new-4")).text


async def test_agent_visibility_on_a_new_session_follows_the_requested_agent(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant, max_session_visibility="all")
    r = await client.post("/v1/sessions/pet-by-coder/events", headers=bearer(key), json={
        "user_id": "alice", "agent_id": "coder",
        "events": [{"type": "message", "role": "user", "content": PET}]})
    assert r.status_code == 201, r.text
    await container.recall.idle()
    pet = event_ref("pet-by-coder", 1)
    mine = await ask(client, key, "fresh", agent_id="coder", session_visibility="agent")
    assert pet in mine.text
    other = await ask(client, key, "fresh-2", agent_id="writer", session_visibility="agent")
    assert pet not in other.text


async def test_stated_preferences_become_gated_memory_candidates(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    seqs = await say(client, key, "prefs", "alice",
                     "I prefer answers as short bullet points.", "Noted.",
                     "My api key is sk-proj-Qm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZmdo, "
                     "I always paste it here.", "Please don't.",
                     "Do you prefer tea or coffee?")
    await say(client, key, "prefs", "alice", "I prefer answers as short bullet points.")
    await container.recall.idle()

    r = await client.get("/v1/memories?user_id=alice", headers=bearer(key))
    memories = r.json()["memories"]
    assert [(m["statement"], m["origin"], m["evidence_ref"], m["status"]) for m in memories] \
        == [("I prefer answers as short bullet points.", "user_stated",
             event_ref("prefs", seqs[0]), "active")]  # the repeat was a duplicate
    # The secret-bearing statement was rejected by the gate and left no row; the question
    # was never a candidate.
    assert "sk-proj-" not in r.text
