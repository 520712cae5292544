"""One relevance order across retrieved layers, end to end on the real stores (E5,
PostgreSQL, Redis): on a new session's first turn under a tight budget, the earlier session's
event that answers the question goes in before knowledge chunks that are only on its topic —
they used to win on their layer's fixed priority (knowledge 40, transcripts 30)."""

from __future__ import annotations

from typing import Any

import httpx

from app.core.refs import event_ref
from app.main import Container
from tests.api.conftest import KeyMaker, bearer
from tests.api.test_cross_session_recall import CHATTER, say

# Longer than any note: a budget whose leftover still holds a note has no room for it.
SISTER = ("My sister Ana moved to Porto last spring; she rents a small flat near the river, "
          "walks to work along the water every morning and says she will never live anywhere "
          "else again.")
QUESTION = "where does my sister live now?"
# On the topic (where people live), passing the relevance floor, but no answer.
RELOCATION = [f"Relocation note {i}: staff who live in a new city update their address "
              f"within {10 + i} days." for i in range(8)]


async def test_an_earlier_sessions_fact_beats_less_relevant_knowledge_on_a_tight_budget(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant, max_session_visibility="all")
    items = [{"doc_id": f"reloc{i}", "version": 1, "sensitivity": "internal",
              "trust": "reviewed", "acl": None, "text": text}
             for i, text in enumerate(RELOCATION)]
    r = await client.post("/v1/knowledge/documents", headers=bearer(key), json={"items": items})
    assert r.status_code == 201, r.text
    await say(client, key, "old-chat", "alice", *CHATTER)
    seqs = await say(client, key, "old-family", "alice", SISTER, "How nice!")
    await container.recall.idle()
    sister = event_ref("old-family", seqs[0])

    async def ask(reserve_output: int) -> dict[str, Any]:
        r = await client.post("/v1/context", headers=bearer(key), json={
            "user_id": "alice", "session_id": "brand-new", "query": QUESTION,
            "data_level": "internal", "session_visibility": "all",
            "budget": {"max_tokens": 1000, "reserve_output": reserve_output}})
        assert r.status_code == 200, r.text
        return dict(r.json()["manifest"])

    # Sized from a roomy turn: room for the query, the event and one note, no more.
    tokens = {s["ref"]: s["tokens"] for s in (await ask(0))["segments"]}
    assert sister in tokens
    note = min(t for ref, t in tokens.items() if ref.startswith("kb://"))
    usable = tokens["turn://query"] + tokens[sister] + note
    manifest = await ask(1000 - usable)
    kept = [s["ref"] for s in manifest["segments"]]
    dropped = {d["ref"]: d["type"] for d in manifest["dropped"]}
    assert sister in kept
    # Notes that cleared the floor lost to the event: by a fixed layer priority they filled
    # the budget first and the event, larger than the leftover, was dropped.
    lost = [ref for ref, t in dropped.items()
            if ref.startswith("kb://") and t == "dropped.budget.section_full"]
    assert len(lost) >= len(RELOCATION) - 1, manifest["dropped"]
