"""Every client method against a live server (uvicorn on loopback, real stores), once with
the sync client and once with the async one (the ``connect`` fixture)."""

from __future__ import annotations

import asyncio

import pytest
from ctxgate_client import (
    AsyncCtxgateClient,
    Chunk,
    ConflictError,
    DocumentIn,
    ForbiddenError,
    InvalidRequestError,
    MemoryIn,
    MemoryScope,
    Message,
    NotFoundError,
    Retrieval,
    StaleRevisionError,
    ToolCall,
    ToolResult,
    UnauthorizedError,
)
from ctxgate_client.models import DocumentIngested, IngestJob

from tests.client.conftest import Connect

DIM = 384  # the server's embedder (e5-small)

BUNDLE = "github.com/acme/payments:rules ü"
REFUND = ("Refund calls time out after 30 seconds because RetryConfig caps the retries at "
          "three; raise the cap only with SRE sign-off.")


def doc(doc_id: str, text: str = REFUND) -> DocumentIn:
    return DocumentIn(doc_id=doc_id, version="v1", text=text, domain="payments",
                      sensitivity="internal", trust="reviewed")


async def test_a_turn_end_to_end(connect: Connect, keys: dict[str, str]) -> None:
    ctx = connect(keys["runtime"])
    one = await ctx.ingest_document(doc_id="runbook", version=3, text=REFUND,
                                    sensitivity="internal", trust="reviewed",
                                    domain="payments")
    assert isinstance(one, DocumentIngested)  # a short text: written at once (201)
    assert (one.doc_id, one.version, one.chunks >= 1) == ("runbook", "3", True)
    many = await ctx.ingest_documents([doc("faq-1"), {**doc("faq-2").wire(), "title": "FAQ"}])
    assert [d.doc_id for d in many] == ["faq-1", "faq-2"]

    appended = await ctx.append_events("s1", user_id="alice", agent_id="coder", events=[
        Message(role="user", content="the refund call times out"),
        ToolCall(call_id="c1", name="grep", arguments={"pattern": "RetryConfig"}),
        ToolResult(call_id="c1", content="RetryConfig.java:12 maxAttempts=3"),
    ])
    assert len(appended.seqs) == 3
    saved = await ctx.put_checkpoint(
        "task-1", user_id="alice", session_id="s1", goal="Fix the refund timeout",
        constraints=[{"text": "Only change RetryConfig", "kind": "only"}],
        pending_approvals=["SRE sign-off"], next_safe_action="rerun RefundIT")
    assert saved.revision == 1

    turn = await ctx.assemble_context(
        user_id="alice", session_id="s1", task_id="task-1", turn_id="turn-a1",
        query="why does the refund call time out?", budget=6000, domain="payments",
        render="anthropic", append_events=[{"type": "message", "role": "assistant",
                                            "content": "looking at RetryConfig"}])
    assert turn.turn_id == "turn-a1"
    assert turn.envelope.render == "anthropic" and turn.manifest.render == "anthropic"
    assert turn.envelope.system is not None and turn.envelope.messages[0]["role"] == "user"
    assert turn.appended is not None and len(turn.appended.seqs) == 1
    again = await ctx.assemble_context(
        user_id="alice", session_id="s1", task_id="task-1", turn_id="turn-a1",
        query="why does the refund call time out?", budget=6000, domain="payments",
        render="anthropic", append_events=[{"type": "message", "role": "assistant",
                                            "content": "looking at RetryConfig"}])
    assert again.appended == turn.appended  # a retried turn_id appends nothing new
    assert "RetryConfig" in str(turn.envelope.messages) + str(turn.envelope.system)

    page = await ctx.list_events("s1", user_id="alice", limit=2)
    assert [e.type for e in page.events] == ["message", "tool_call"]
    assert page.next_after_seq == page.events[-1].seq
    rest = await ctx.list_events("s1", user_id="alice", after_seq=page.next_after_seq)
    assert [e.content for e in rest.events][-1] == "looking at RetryConfig"
    hits = await ctx.search_sessions("s1", user_id="alice", query="RetryConfig",
                                     visibility="self", limit=5)
    assert hits.hits and all(h.session_id == "s1" for h in hits.hits)

    got = await ctx.get_checkpoint("task-1", user_id="alice")
    assert (got.revision, got.goal, got.constraints[0]["kind"]) == (
        1, "Fix the refund timeout", "only")
    assert (await ctx.get_checkpoint("task-1", 1, user_id="alice")).revision == 1
    compaction = await ctx.compact_session("s1", user_id="alice", budget_tokens=50,
                                           task_id="task-1")
    assert compaction.trigger == "manual" and compaction.compaction_id
    breaker = await connect(keys["admin"]).reset_compaction("s1")
    assert (breaker.session_id, breaker.state) == ("s1", "closed")

    manifest = await ctx.get_manifest("turn-a1")
    assert manifest.turn_id == "turn-a1" and manifest.session_id == "s1"
    listed = await ctx.list_manifests(session_id="s1", limit=10)
    assert "turn-a1" in [m.turn_id for m in listed.manifests]
    audit = await connect(keys["ops"]).list_audit(turn_id="turn-a1", limit=10)
    assert isinstance(audit.records, list)
    seen = manifest.segments[0]["ref"]
    why = await connect(keys["ops"]).explain("turn-a1", seen)
    assert (why.turn_id, why.ref, why.outcome, why.stage) == ("turn-a1", seen, "included", None)


async def test_memories(connect: Connect, keys: dict[str, str]) -> None:
    ctx = connect(keys["runtime"])
    first = await ctx.propose_memory(
        statement="Alice prefers answers in Chinese", scope={"level": "user",
                                                             "user_id": "alice"},
        origin="user_stated", source_session="s1", owner="alice")
    assert first.decision == "accepted" and first.memory is not None
    batch = await ctx.propose_memories([
        MemoryIn(statement="Alice works on the payments team",
                 scope=MemoryScope(level="user", user_id="alice"),
                 origin="user_stated", source_session="s1", owner="alice"),
        {"statement": "Deploys freeze on Fridays", "scope": {"level": "team"},
         "origin": "team_decision", "evidence_ref": "wiki://freeze", "source_session": "s1",
         "owner": "alice"},
    ])
    assert [d.decision for d in batch] == ["accepted", "pending"]
    pending = batch[1].memory
    assert pending is not None

    mine = await ctx.recall_memories("alice")
    assert {m.statement for m in mine} >= {"Alice prefers answers in Chinese",
                                          "Alice works on the payments team"}
    listed = await ctx.list_memories(scope="team", status="pending")
    assert [m.memory_id for m in listed.memories] == [pending.memory_id]
    detail = await ctx.get_memory(first.memory.memory_id, user_id="alice")
    assert detail.statement == first.memory.statement and isinstance(detail.history, list)

    admin = connect(keys["admin"])
    assert (await admin.approve_memory(pending.memory_id)).status == "active"
    other = await ctx.propose_memory(
        statement="Releases need two approvals", scope={"level": "team"},
        origin="team_decision", evidence_ref="wiki://releases", source_session="s1",
        owner="alice")
    assert other.memory is not None
    assert (await admin.reject_memory(other.memory.memory_id)).status == "rejected"

    await ctx.delete_memory(first.memory.memory_id, user_id="alice")
    with pytest.raises(NotFoundError) as missing:
        await ctx.get_memory(first.memory.memory_id, user_id="alice")
    assert missing.value.status == 404 and missing.value.type == "not-found"


async def test_bundles(connect: Connect, keys: dict[str, str]) -> None:
    admin = connect(keys["admin"])
    for rev, rule in (("3", "Only change RetryConfig."), ("4", "Never touch RetryConfig.")):
        out = await admin.register_bundle_revision(
            bundle_id=BUNDLE, revision=rev, runtime="codex",
            source={"repo": "github.com/acme/payments-api", "commit": f"c{rev}"},
            files=[{"path": "AGENTS.md", "content": "# Payments\n"},
                   {"path": "services/refund/AGENTS.md", "content": rule}],
            approval={"owner": "team-payments"})
        assert (out.revision, out.revoked) == (rev, False)
    channel = await admin.promote_bundle(BUNDLE, revision="3")
    assert channel.stable == "3"
    canary = await admin.promote_bundle(BUNDLE, revision="4", share=0.5,
                                        agents=["bot-1"])
    assert (canary.canary, canary.canary_agents) == ("4", ["bot-1"])
    four = await admin.get_bundle_revision(BUNDLE, "4")
    assert four.files is not None and {f["path"] for f in four.files} == {
        "AGENTS.md", "services/refund/AGENTS.md"}
    diff = await admin.bundle_diff(BUNDLE, from_revision="3", to_revision="4",
                                   cwd="services/refund")
    assert "+Never touch RetryConfig." in diff.diff and diff.from_ == "3"
    revoked = await admin.revoke_bundle_revision(BUNDLE, "4", reason="bad rule")
    assert [r.revoked for r in revoked.revisions if r.revision == "4"] == [True]
    assert (await connect(keys["runtime"]).get_bundle(BUNDLE)).bundle_id \
        == BUNDLE
    with pytest.raises(ConflictError):  # the same revision with other content
        await admin.register_bundle_revision(
            bundle_id=BUNDLE, revision="3", runtime="codex",
            files=[{"path": "AGENTS.md", "content": "something else"}])


async def test_admin_erasure_and_health(connect: Connect, admin: AsyncCtxgateClient,
                                        keys: dict[str, str], tenant: str) -> None:
    ctx = connect(keys["runtime"])
    await ctx.append_events("s1", user_id="bob", events=[Message(role="user", content="hi")])
    job = await connect(keys["admin"]).request_erasure("bob", reason="asked to be forgotten")
    seen = await connect(keys["ops"]).get_erasure(job.erasure_id)
    assert seen.erasure_id == job.erasure_id and seen.status in {"pending", "running", "done"}

    await admin.put_tenant_identity(tenant, algorithm="HS256", key="s" * 32,
                                    require_assertion=False)
    made = await admin.create_key(tenant_id=tenant, role="runtime", name="short-lived")
    short = connect(made.api_key)
    assert (await short.list_memories(user_id="alice")).memories == []
    await admin.revoke_key(made.key_id)
    listed = {k.key_id: k for k in (await admin.list_keys(tenant_id=tenant)).keys}
    assert listed[made.key_id].revoked_at is not None and len(listed) == 4
    with pytest.raises(UnauthorizedError) as denied:
        await short.list_memories(user_id="alice")
    assert (denied.value.status, denied.value.type) == (401, "unauthorized")

    assert (await ctx.healthz()).status == "ok"
    ready = await ctx.readyz()
    assert ready.ok and ready.checks
    assert "ctxgate" in await ctx.metrics()


async def test_errors_are_typed_problems(connect: Connect, keys: dict[str, str]) -> None:
    ctx = connect(keys["runtime"])
    with pytest.raises(NotFoundError):
        await ctx.get_manifest("no-such-turn")
    with pytest.raises(ForbiddenError) as forbidden:  # audit is for ops and admin keys
        await ctx.list_audit()
    assert forbidden.value.type == "forbidden-scope"
    with pytest.raises(InvalidRequestError) as invalid:  # a control character in an id
        await ctx.append_events("s1", user_id="ali\x07ce",
                                events=[Message(role="user", content="x")])
    assert invalid.value.status == 422 and invalid.value.errors
    assert invalid.value.errors[0]["loc"][:2] == ["body", "user_id"]

    await ctx.put_checkpoint("task-9", user_id="alice", goal="g")
    with pytest.raises(StaleRevisionError) as stale:
        await ctx.put_checkpoint("task-9", user_id="alice", goal="g2", expected_revision=7)
    assert isinstance(stale.value, ConflictError) and stale.value.status == 409
    await ctx.assemble_context(user_id="alice", query="q one", budget=2000, turn_id="t-1")
    with pytest.raises(ConflictError) as reused:  # the same turn_id with another body
        await ctx.assemble_context(user_id="alice", query="q two", budget=2000, turn_id="t-1")
    assert reused.value.status == 409


NASTY_DOCS = ["docs/payments/refund.md", "https://wiki.acme.com/Refund_Timeout?x=1#top",
              "a%2Fb", "a/b", "agent:main:1", "Zürich ☃", "a b", "..", ".", "*", "x" * 256]


async def test_documents_and_ids_as_users_have_them(connect: Connect,
                                                    keys: dict[str, str]) -> None:
    ctx = connect(keys["runtime"])
    done = await ctx.ingest_documents([doc(i) for i in NASTY_DOCS])
    assert [d.doc_id for d in done] == NASTY_DOCS
    again = await ctx.ingest_document(doc_id=NASTY_DOCS[0], version="6f2d1be", text=REFUND,
                                      sensitivity="internal", trust="reviewed")
    assert again.version == "6f2d1be"

    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await ctx.list_documents(limit=4, cursor=cursor)
        seen += [d.doc_id for d in page.documents]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(seen) == sorted(NASTY_DOCS)
    for doc_id in NASTY_DOCS:
        assert (await ctx.get_document(doc_id)).doc_id == doc_id
    first = await ctx.get_document(NASTY_DOCS[0])
    assert (first.version, first.revision, first.versions) == ("6f2d1be", 2, 2)
    await ctx.delete_document("a%2Fb")
    with pytest.raises(NotFoundError):
        await ctx.get_document("a%2Fb")
    assert (await ctx.get_document("a/b")).doc_id == "a/b"  # not the same document

    user, session, task = "auth0|65f0c1", "team/agent:main:discord:123", "tasks/ü 1"
    await ctx.append_events(session, user_id=user, events=[Message(role="user", content="hi")])
    await ctx.put_checkpoint(task, user_id=user, session_id=session, goal="ship it")
    turn = await ctx.assemble_context(user_id=user, session_id=session, task_id=task,
                                      turn_id="turn:1/ü@x", query="what now?", budget=4000)
    assert (turn.turn_id, turn.manifest.session_id) == ("turn:1/ü@x", session)
    assert (await ctx.get_manifest("turn:1/ü@x")).user_id == user
    assert (await ctx.get_checkpoint(task, user_id=user)).goal == "ship it"
    assert [e.content for e in (await ctx.list_events(session, user_id=user)).events] == ["hi"]
    with pytest.raises(InvalidRequestError):  # 257 characters
        await ctx.get_document("x" * 257)



async def test_a_large_document_is_ingested_as_a_job(connect: Connect,
                                                     keys: dict[str, str]) -> None:
    ctx = connect(keys["runtime"])
    text = "\n\n".join(f"Section {i}: {REFUND}" for i in range(60))  # > 4 chunks
    job = await ctx.ingest_document(doc_id="big-runbook", version="v1", text=text,
                                    sensitivity="internal", trust="reviewed")
    assert isinstance(job, IngestJob) and job.status in ("pending", "running", "done")
    for _ in range(600):
        job = await ctx.get_ingest_job(job.job_id)
        if job.status in ("done", "failed"):
            break
        await asyncio.sleep(0.1)
    assert (job.status, job.doc_id, job.version) == ("done", "big-runbook", "v1")
    assert job.chunks is not None and job.chunks > 4
    assert (await ctx.get_document("big-runbook")).chunks == job.chunks
    with pytest.raises(NotFoundError):
        await ctx.get_ingest_job("0" * 32)


async def test_writes_with_the_clients_own_embeddings(connect: Connect,
                                                      keys: dict[str, str]) -> None:
    ctx = connect(keys["runtime"])
    unit = [1.0] + [0.0] * (DIM - 1)
    done = await ctx.ingest_document(
        doc_id="pre-chunked", version="v1", sensitivity="internal", trust="reviewed",
        chunks=[Chunk(text="RetryConfig caps retries at three.", embedding=unit),
                {"text": "Raise it only with SRE sign-off.", "embedding": unit}])
    assert done.chunks == 2
    memory = await ctx.propose_memory(
        statement="Alice deploys on Tuesdays", scope={"level": "user", "user_id": "alice"},
        origin="user_stated", source_session="s1", owner="alice", embedding=unit)
    assert memory.decision == "accepted"
    turn = await ctx.assemble_context(user_id="alice", query="retry cap?", budget=3000,
                                      query_embedding=unit)
    assert "RetryConfig" in str(turn.envelope.messages)


async def test_memory_purpose_and_tenant_wide(connect: Connect, keys: dict[str, str]) -> None:
    ctx = connect(keys["runtime"])
    support = await ctx.propose_memory(
        statement="Refund callbacks go out within the hour",
        scope={"level": "user", "user_id": "alice"}, origin="user_stated",
        source_session="s1", owner="alice", purpose="support")
    assert support.memory is not None and support.memory.purpose == "support"
    wide = await ctx.propose_memory(
        statement="Incidents are reviewed every Monday", scope={"level": "team"},
        origin="team_decision", evidence_ref="wiki://incidents", source_session="s1",
        owner="alice", tenant_wide=True)
    assert wide.memory is not None and wide.memory.tenant_wide
    query = "when do refund callbacks go out?"
    refs = [s["ref"] for s in (await ctx.assemble_context(
        user_id="alice", query=query, budget=3000, purpose="support")).manifest.segments]
    assert any(support.memory.memory_id in ref for ref in refs)
    plain = await ctx.assemble_context(user_id="alice", query=query, budget=3000)
    assert not any(support.memory.memory_id in s["ref"] for s in plain.manifest.segments)


async def test_a_turn_sets_its_retrieval_depth_and_floor(connect: Connect,
                                                          keys: dict[str, str]) -> None:
    ctx = connect(keys["runtime"])
    await ctx.ingest_documents([doc(f"note-{i}", f"{REFUND} Note {i}.") for i in range(4)])
    query = "why does the refund call time out?"
    few = await ctx.assemble_context(user_id="alice", domain="payments", query=query,
                                     budget=8000, retrieval=Retrieval(knowledge_limit=1))
    assert few.manifest.retrieval["knowledge"] == 1
    assert sum(s["ref"].startswith("kb://") for s in few.manifest.segments) == 1
    strict = await ctx.assemble_context(user_id="alice", domain="payments", query=query,
                                        budget=8000, retrieval={"min_score": 1.0,
                                                                "memory_limit": 0})
    assert strict.manifest.retrieval["floor"] == 1.0
    with pytest.raises(InvalidRequestError):
        await ctx.assemble_context(user_id="alice", query=query, budget=8000,
                                   retrieval=Retrieval(knowledge_limit=101))
