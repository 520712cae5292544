"""``AsyncCtxgateClient``: every endpoint of the ctxgate HTTP API, typed.

``_async_client.py`` is the one hand-written method list; ``_sync_client.py`` is generated
from it by ``clients/python/tools/unasync.py`` (a test checks it is current). Each method builds a
``Call`` (``_call.py``: path, query, body, how to read the answer, whether a retry is safe);
``_send`` moves it and applies the ``RetryPolicy``.
"""

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from ctxgate_client._call import (
    Call,
    RetryPolicy,
    batch,
    body,
    client_options,
    either,
    items,
    model,
    nothing,
    path,
    read_text,
    wire_events,
)
from ctxgate_client.errors import connection_error
from ctxgate_client.models import (
    Acl,
    AuditList,
    Budget,
    Bundle,
    BundleDiff,
    BundleEvaluation,
    BundleFile,
    BundleReview,
    BundleRevision,
    Canary,
    CanaryList,
    Channel,
    Checkpoint,
    CheckpointSaved,
    Chunk,
    Compaction,
    CompactionBreaker,
    Constraint,
    ContextResponse,
    DataLevel,
    Document,
    DocumentIn,
    DocumentIngested,
    DocumentList,
    EmbeddingsReport,
    Erasure,
    ErasureAccepted,
    Event,
    EventsAppended,
    EventsPage,
    Explanation,
    Health,
    IngestJob,
    KeyCreated,
    KeyList,
    Manifest,
    ManifestList,
    Memory,
    MemoryDecision,
    MemoryDetail,
    MemoryIn,
    MemoryList,
    MemoryScope,
    Origin,
    Purpose,
    Readiness,
    Render,
    Replay,
    Retrieval,
    Role,
    RuntimeName,
    SessionType,
    TenantSettings,
    ToolEffect,
    TranscriptSearch,
    Trust,
    Visibility,
    Workspace,
)

T = TypeVar("T")
EventLike = Event | Mapping[str, Any]


class AsyncCtxgateClient:
    """An async client of one ctxgate server, with one key.

    ``api_key`` is a tenant key (runtime, ops or admin) or, for ``create_key``,
    ``list_keys``, ``revoke_key``, ``put_tenant_identity`` and the tenant settings calls,
    the platform admin token.
    ``user_assertion`` is the signed end-user JWT a tenant may require (sent as
    ``X-Ctxgate-User-Assertion``).
    ``transport`` replaces httpx's network transport (e.g. ``httpx.ASGITransport(app)`` to
    drive an app in-process); ``timeout`` bounds each attempt (seconds or ``httpx.Timeout``);
    ``retry`` says which failures are sent again (see ``RetryPolicy``).

    ``base_url`` defaults to ``$CTXGATE_URL`` (else http://127.0.0.1:8080) and ``api_key``
    to ``$CTXGATE_API_KEY``. Failures raise ``ctxgate_client.errors.CtxgateError``
    subclasses; a call that got no answer raises ``CtxgateConnectionError``.
    """

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *,
                 timeout: float | httpx.Timeout = 30.0, retry: RetryPolicy | None = None,
                 headers: Mapping[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 user_assertion: str | None = None) -> None:
        self._retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(
            transport=transport, **client_options(
                base_url=base_url, api_key=api_key, user_assertion=user_assertion,
                headers=headers, timeout=timeout))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        attempts = self._retry.start()
        while True:
            try:
                response = await self._http.request(**call.request())
            except httpx.TransportError as exc:
                raise connection_error(exc) from exc
            wait = attempts.delay(call, response)
            if wait is None:
                return call.result(response)
            await asyncio.sleep(wait)

    # --- context ----------------------------------------------------------------------------

    async def assemble_context(
        self, *, user_id: str, query: str, budget: Budget | int,
        session_id: str | None = None, task_id: str | None = None,
        turn_id: str | None = None, append_events: Sequence[EventLike] | None = None,
        render: Render | None = None, groups: Sequence[str] | None = None,
        domain: str | None = None, data_level: DataLevel | None = None,
        query_embedding: Sequence[float] | None = None, redaction_profile: str | None = None,
        session_visibility: Visibility | None = None,
        workspace: Workspace | Mapping[str, Any] | None = None, agent_id: str | None = None,
        parent_session_id: str | None = None, tenant_id: str | None = None,
        purpose: Purpose | None = None,
        retrieval: Retrieval | Mapping[str, Any] | None = None,
    ) -> ContextResponse:
        """POST /v1/context: assemble one turn. ``budget`` is a ``Budget`` or its
        ``max_tokens``. ``append_events`` are appended to ``session_id`` first, in the same
        call (``parent_session_id``, ``agent_id``: of a session they create). With a
        ``turn_id`` of your own the call is retried on 503/429 (the server answers a
        repeated turn_id with the first answer and appends once); without one it is sent
        once. ``retrieval`` sets the turn's per-layer depth and relevance floor."""
        return await self._send(Call(
            method="POST", path="/v1/context", read=model(ContextResponse),
            idempotent=turn_id is not None,
            body=body(
                tenant_id=tenant_id, turn_id=turn_id, session_id=session_id, task_id=task_id,
                user_id=user_id, groups=groups, domain=domain, data_level=data_level,
                query=query, query_embedding=query_embedding,
                budget=Budget(max_tokens=budget) if isinstance(budget, int) else budget,
                redaction_profile=redaction_profile, session_visibility=session_visibility,
                workspace=workspace, agent_id=agent_id, render=render,
                append_events=wire_events(append_events) if append_events is not None else None,
                parent_session_id=parent_session_id, purpose=purpose, retrieval=retrieval)))

    # --- sessions ---------------------------------------------------------------------------

    async def append_events(
        self, session_id: str, *, user_id: str, events: Sequence[EventLike],
        agent_id: str | None = None, parent_session_id: str | None = None,
        tenant_id: str | None = None, idempotency_key: str | None = None,
    ) -> EventsAppended:
        """POST /v1/sessions/{id}/events: append events (``Message``, ``ToolCall``,
        ``ToolResult`` or their dicts) in order. With ``idempotency_key`` (sent as
        ``Idempotency-Key``) the append is applied at most once and retried like any safe
        call; without one it is sent once."""
        return await self._send(Call(
            method="POST", path=path("/v1/sessions/{}/events", session_id),
            read=model(EventsAppended), idempotent=idempotency_key is not None,
            headers=None if idempotency_key is None else {"Idempotency-Key": idempotency_key},
            body=body(tenant_id=tenant_id, user_id=user_id, agent_id=agent_id,
                      parent_session_id=parent_session_id, events=wire_events(events))))

    async def list_events(self, session_id: str, *, user_id: str, after_seq: int | None = None,
                          limit: int | None = None) -> EventsPage:
        """GET /v1/sessions/{id}/events: the archived transcript after ``after_seq``; page
        on with ``next_after_seq``."""
        return await self._send(Call(
            method="GET", path=path("/v1/sessions/{}/events", session_id),
            read=model(EventsPage), idempotent=True,
            params={"user_id": user_id, "after_seq": after_seq, "limit": limit}))

    async def search_sessions(self, session_id: str, *, user_id: str, query: str,
                              visibility: Visibility | None = None,
                              limit: int | None = None) -> TranscriptSearch:
        """GET /v1/sessions/{id}/search: full-text search of the transcripts this session
        may see (``self`` < ``tree`` < ``agent`` < ``all``, capped by the key)."""
        return await self._send(Call(
            method="GET", path=path("/v1/sessions/{}/search", session_id),
            read=model(TranscriptSearch), idempotent=True,
            params={"user_id": user_id, "q": query, "visibility": visibility,
                    "limit": limit}))

    async def compact_session(self, session_id: str, *, user_id: str, budget_tokens: int,
                              task_id: str | None = None,
                              tenant_id: str | None = None) -> Compaction:
        """POST /v1/sessions/{id}/compact: compact now (committing facts into ``task_id``'s
        checkpoint when given). Sent once."""
        return await self._send(Call(
            method="POST", path=path("/v1/sessions/{}/compact", session_id),
            read=model(Compaction),
            body=body(tenant_id=tenant_id, user_id=user_id, task_id=task_id,
                      budget_tokens=budget_tokens)))

    async def reset_compaction(self, session_id: str) -> CompactionBreaker:
        """POST /v1/sessions/{id}/compaction/reset (admin key): close the session's
        compaction breaker, so the next compaction calls the model again. Retried on
        503/429: resetting twice leaves it closed."""
        return await self._send(Call(
            method="POST", path=path("/v1/sessions/{}/compaction/reset", session_id),
            read=model(CompactionBreaker), idempotent=True))

    # --- tasks ------------------------------------------------------------------------------

    async def put_checkpoint(
        self, task_id: str, *, user_id: str, goal: str, session_id: str | None = None,
        parent_task_id: str | None = None, expected_revision: int | None = None,
        accepted_decisions: Sequence[str] | None = None,
        verified_evidence: Sequence[str] | None = None,
        open_questions: Sequence[str] | None = None,
        constraints: Sequence[Constraint | Mapping[str, Any]] | None = None,
        pending_approvals: Sequence[str] | None = None,
        tool_effects: Sequence[ToolEffect | Mapping[str, Any]] | None = None,
        next_safe_action: str | None = None, tenant_id: str | None = None,
    ) -> CheckpointSaved:
        """PUT /v1/tasks/{id}/checkpoint: write the next revision of the task's state. With
        ``expected_revision`` it is a compare-and-set (a lost race is
        ``StaleRevisionError``) and is retried on 503/429; without, it is sent once."""
        return await self._send(Call(
            method="PUT", path=path("/v1/tasks/{}/checkpoint", task_id),
            read=model(CheckpointSaved), idempotent=expected_revision is not None,
            body=body(
                tenant_id=tenant_id, user_id=user_id, session_id=session_id,
                parent_task_id=parent_task_id, expected_revision=expected_revision, goal=goal,
                accepted_decisions=accepted_decisions, verified_evidence=verified_evidence,
                open_questions=open_questions,
                constraints=[Constraint.model_validate(c) for c in constraints]
                if constraints is not None else None,
                pending_approvals=pending_approvals,
                tool_effects=[ToolEffect.model_validate(t) for t in tool_effects]
                if tool_effects is not None else None,
                next_safe_action=next_safe_action)))

    async def get_checkpoint(self, task_id: str, revision: int | None = None, *,
                             user_id: str | None = None) -> Checkpoint:
        """GET /v1/tasks/{id}/checkpoint: the latest revision, or ``revision``. A runtime
        key must name the ``user_id``."""
        return await self._send(Call(
            method="GET", path=path("/v1/tasks/{}/checkpoint", task_id),
            read=model(Checkpoint), idempotent=True,
            params={"revision": revision, "user_id": user_id}))

    # --- knowledge --------------------------------------------------------------------------

    async def ingest_document(
        self, *, doc_id: str, version: str | int, sensitivity: DataLevel, trust: Trust,
        text: str | None = None, chunks: Sequence[Chunk | Mapping[str, Any]] | None = None,
        acl: Acl | Mapping[str, Any] | None = None, title: str | None = None,
        domain: str | None = None, observed_at: datetime | None = None,
        expires_at: datetime | None = None, source: str | None = None,
        tenant_id: str | None = None,
    ) -> DocumentIngested | IngestJob:
        """POST /v1/knowledge/documents: index one document given as ``text`` (chunked and
        embedded by the server) or as ``chunks`` with your embeddings (``acl=None``: the
        whole tenant may read it). Sent once. A text too large to embed on the request path
        is accepted as a background job (HTTP 202): an ``IngestJob`` comes back instead of
        ``DocumentIngested``; poll ``get_ingest_job(job.job_id)`` until it is done."""
        doc = DocumentIn.model_validate(body(
            doc_id=doc_id, version=version, text=text, chunks=chunks, sensitivity=sensitivity,
            trust=trust, acl=acl, title=title, domain=domain, observed_at=observed_at,
            expires_at=expires_at, source=source, tenant_id=tenant_id))
        return await self._send(Call(
            method="POST", path="/v1/knowledge/documents",
            read=either(DocumentIngested, IngestJob), body=doc.wire()))

    async def ingest_documents(self, documents: Sequence[DocumentIn | Mapping[str, Any]]
                               ) -> list[DocumentIngested]:
        """POST /v1/knowledge/documents with ``{"items": [...]}`` (1..100): all or nothing,
        one embedder call; the results in request order. Sent once."""
        return await self._send(Call(
            method="POST", path="/v1/knowledge/documents", read=items(DocumentIngested),
            body=batch(DocumentIn, documents)))

    async def get_ingest_job(self, job_id: str) -> IngestJob:
        """GET /v1/knowledge/jobs/{job_id}: a background ingest's status, progress and, once
        done, the written version's chunk count."""
        return await self._send(Call(
            method="GET", path=path("/v1/knowledge/jobs/{}", job_id), read=model(IngestJob),
            idempotent=True))

    async def list_documents(self, *, limit: int | None = None, cursor: str | None = None
                             ) -> DocumentList:
        """GET /v1/knowledge/documents: one page of the tenant's documents; pass the
        answer's ``next_cursor`` as ``cursor`` for the next."""
        return await self._send(Call(
            method="GET", path="/v1/knowledge/documents", read=model(DocumentList),
            idempotent=True, params={"limit": limit, "cursor": cursor}))

    async def get_document(self, doc_id: str) -> Document:
        """GET /v1/knowledge/documents/{doc_id} (any id: it is escaped as one segment)."""
        return await self._send(Call(
            method="GET", path=path("/v1/knowledge/documents/{}", doc_id),
            read=model(Document), idempotent=True))

    async def delete_document(self, doc_id: str) -> None:
        """DELETE /v1/knowledge/documents/{doc_id}: every version and chunk of it."""
        return await self._send(Call(
            method="DELETE", path=path("/v1/knowledge/documents/{}", doc_id), read=nothing,
            idempotent=True))

    # --- memories ---------------------------------------------------------------------------

    async def propose_memory(
        self, *, statement: str, scope: MemoryScope | Mapping[str, Any], origin: Origin,
        source_session: str, owner: str, evidence_ref: str | None = None,
        confidence: float | None = None, sensitivity: DataLevel | None = None,
        key: str | None = None, expires_at: datetime | None = None,
        ttl_days: int | None = None, task_id: str | None = None, pinned: bool | None = None,
        embedding: Sequence[float] | None = None, tenant_id: str | None = None,
        purpose: Purpose | None = None, tenant_wide: bool | None = None,
    ) -> MemoryDecision:
        """POST /v1/memories: propose one memory to the write gate (``embedding``: the
        statement embedded by your model; the server's embedder is then not called;
        ``purpose``: recalled only by turns of that purpose, omitted: by every turn;
        ``tenant_wide``: a team memory without a domain served in every domain). A
        refusal is an answer (``decision="rejected"``), not an error. Sent once."""
        item = MemoryIn.model_validate(body(
            statement=statement, scope=scope, origin=origin, source_session=source_session,
            owner=owner, evidence_ref=evidence_ref, confidence=confidence,
            sensitivity=sensitivity, key=key, expires_at=expires_at, ttl_days=ttl_days,
            task_id=task_id, pinned=pinned, embedding=embedding, tenant_id=tenant_id,
            purpose=purpose, tenant_wide=tenant_wide))
        return await self._send(Call(
            method="POST", path="/v1/memories", read=model(MemoryDecision), body=item.wire()))

    async def propose_memories(self, memories: Sequence[MemoryIn | Mapping[str, Any]]
                               ) -> list[MemoryDecision]:
        """POST /v1/memories with ``{"items": [...]}`` (1..100): one decision per item, in
        order. Sent once."""
        return await self._send(Call(
            method="POST", path="/v1/memories", read=items(MemoryDecision),
            body=batch(MemoryIn, memories)))

    async def list_memories(self, *, user_id: str | None = None, scope: str | None = None,
                            status: str | None = None, limit: int | None = None
                            ) -> MemoryList:
        """GET /v1/memories: filtered by user, scope level (user/team) and status."""
        return await self._send(Call(
            method="GET", path="/v1/memories", read=model(MemoryList), idempotent=True,
            params={"user_id": user_id, "scope": scope, "status": status, "limit": limit}))

    async def recall_memories(self, user_id: str, *, scope: str | None = None,
                              limit: int | None = None) -> list[Memory]:
        """The user's active memories (GET /v1/memories?status=active)."""
        found = await self.list_memories(user_id=user_id, scope=scope, status="active",
                                         limit=limit)
        return found.memories

    async def get_memory(self, memory_id: str, *, user_id: str | None = None
                         ) -> MemoryDetail:
        """GET /v1/memories/{id}: the memory and its history."""
        return await self._send(Call(
            method="GET", path=path("/v1/memories/{}", memory_id), read=model(MemoryDetail),
            idempotent=True, params={"user_id": user_id}))

    async def delete_memory(self, memory_id: str, *, user_id: str | None = None) -> None:
        """DELETE /v1/memories/{id}."""
        return await self._send(Call(
            method="DELETE", path=path("/v1/memories/{}", memory_id), read=nothing,
            idempotent=True, params={"user_id": user_id}))

    async def approve_memory(self, memory_id: str) -> Memory:
        """POST /v1/memories/{id}/approve (admin key): a pending memory becomes active."""
        return await self._send(Call(
            method="POST", path=path("/v1/memories/{}/approve", memory_id),
            read=model(Memory)))

    async def reject_memory(self, memory_id: str) -> Memory:
        """POST /v1/memories/{id}/reject (admin key)."""
        return await self._send(Call(
            method="POST", path=path("/v1/memories/{}/reject", memory_id),
            read=model(Memory)))

    # --- bundles ----------------------------------------------------------------------------

    async def register_bundle_revision(
        self, *, bundle_id: str, revision: str, runtime: RuntimeName,
        files: Sequence[BundleFile | Mapping[str, Any]],
        source: Mapping[str, str] | None = None, declared_scope: Sequence[str] | None = None,
        approval: Mapping[str, str] | None = None,
        compatibility: Mapping[str, Any] | None = None,
    ) -> BundleRevision:
        """POST /v1/bundles (admin key): register an immutable revision; its ``lint`` lists
        the findings. Retried on 503/429: the same revision with the same files again is a
        no-op (with other files, ``ConflictError``)."""
        return await self._send(Call(
            method="POST", path="/v1/bundles", read=model(BundleRevision), idempotent=True,
            body=body(bundle_id=bundle_id, revision=revision, runtime=runtime,
                      files=[BundleFile.model_validate(f) for f in files], source=source,
                      declared_scope=declared_scope, approval=approval,
                      compatibility=compatibility)))

    async def get_bundle(self, bundle_id: str) -> Bundle:
        """GET /v1/bundles/{id}: its revisions and release channel."""
        return await self._send(Call(
            method="GET", path=path("/v1/bundles/{}", bundle_id), read=model(Bundle),
            idempotent=True))

    async def get_bundle_revision(self, bundle_id: str, revision: str) -> BundleRevision:
        """GET /v1/bundles/{id}/revisions/{rev}: one revision with its files."""
        return await self._send(Call(
            method="GET", path=path("/v1/bundles/{}/revisions/{}", bundle_id, revision),
            read=model(BundleRevision), idempotent=True))

    async def revoke_bundle_revision(self, bundle_id: str, revision: str, *, reason: str
                                     ) -> Bundle:
        """POST /v1/bundles/{id}/revisions/{rev}/revoke (admin key). Retried on 503/429:
        revoking twice is revoking once."""
        return await self._send(Call(
            method="POST", path=path("/v1/bundles/{}/revisions/{}/revoke", bundle_id, revision),
            read=model(Bundle), idempotent=True, body=body(reason=reason)))

    async def promote_bundle(self, bundle_id: str, *, revision: str,
                             share: float | None = None, agents: Sequence[str] | None = None,
                             override_reason: str | None = None) -> Channel:
        """POST /v1/bundles/{id}/promote (admin key): make ``revision`` stable, or the canary
        for ``share`` of sessions and/or the named ``agents``, if the tenant's release gate
        passes (else ConflictError: bundle-lint-blocked, bundle-not-approved,
        bundle-eval-missing, bundle-eval-failed) or with an audited ``override_reason``.
        Retried on 503/429: the same promotion twice leaves the same channel."""
        cohort = body(share=share, agents=agents) if share is not None or agents else None
        return await self._send(Call(
            method="POST", path=path("/v1/bundles/{}/promote", bundle_id), read=model(Channel),
            idempotent=True, body=body(revision=revision, cohort=cohort,
                                       override_reason=override_reason)))

    async def approve_bundle_revision(self, bundle_id: str, revision: str, *,
                                      note: str | None = None) -> BundleReview:
        """POST /v1/bundles/{id}/revisions/{rev}/approve (admin or ops key, not the one that
        registered it). Retried on 503/429: the newest review counts, twice is once."""
        return await self._send(Call(
            method="POST", path=path("/v1/bundles/{}/revisions/{}/approve", bundle_id,
                                     revision),
            read=model(BundleReview), idempotent=True, body=body(note=note)))

    async def reject_bundle_revision(self, bundle_id: str, revision: str, *,
                                     note: str | None = None) -> BundleReview:
        """POST /v1/bundles/{id}/revisions/{rev}/reject (admin or ops key, not the one that
        registered it). Retried on 503/429: the newest review counts, twice is once."""
        return await self._send(Call(
            method="POST", path=path("/v1/bundles/{}/revisions/{}/reject", bundle_id,
                                     revision),
            read=model(BundleReview), idempotent=True, body=body(note=note)))

    async def record_bundle_evaluation(
            self, bundle_id: str, revision: str, *, suite: str, suite_version: str,
            passed: bool, report_sha256: str, metrics: Mapping[str, float | None] | None = None,
            against_revision: str | None = None) -> BundleEvaluation:
        """POST /v1/bundles/{id}/revisions/{rev}/evaluations (admin or ops key): a suite's
        result, e.g. from ``ctxgate eval compare``'s report. Not retried: each call adds a
        record."""
        return await self._send(Call(
            method="POST", path=path("/v1/bundles/{}/revisions/{}/evaluations", bundle_id,
                                     revision),
            read=model(BundleEvaluation), idempotent=False, body=body(
                suite=suite, suite_version=suite_version, passed=passed,
                report_sha256=report_sha256, metrics=dict(metrics or {}),
                against_revision=against_revision)))

    async def shadow_bundle(self, bundle_id: str, *, revision: str | None,
                            share: float | None = None, agents: Sequence[str] | None = None
                            ) -> Channel:
        """POST /v1/bundles/{id}/shadow (admin key): resolve ``revision`` beside the served
        one on the cohort's turns, recorded in their manifests and never served; ``None`` ends
        the shadow. Retried on 503/429: the same shadow twice leaves the same channel."""
        return await self._send(Call(
            method="POST", path=path("/v1/bundles/{}/shadow", bundle_id), read=model(Channel),
            idempotent=True, body={"revision": revision,
                                   "cohort": body(share=share, agents=agents)}))

    async def bundle_diff(self, bundle_id: str, *, from_revision: str, to_revision: str,
                          cwd: str | None = None, session_type: SessionType | None = None
                          ) -> BundleDiff:
        """GET /v1/bundles/{id}/diff: the resolved text's diff and token footprint."""
        return await self._send(Call(
            method="GET", path=path("/v1/bundles/{}/diff", bundle_id), read=model(BundleDiff),
            idempotent=True, params={"from": from_revision, "to": to_revision, "cwd": cwd,
                                     "session_type": session_type}))

    # --- manifests and audit ----------------------------------------------------------------

    async def get_manifest(self, turn_id: str) -> Manifest:
        """GET /v1/manifests/{turn_id}: what the turn saw and dropped."""
        return await self._send(Call(
            method="GET", path=path("/v1/manifests/{}", turn_id), read=model(Manifest),
            idempotent=True))

    async def list_manifests(self, *, session_id: str | None = None,
                             task_id: str | None = None, limit: int | None = None,
                             before: str | None = None, cursor: str | None = None
                             ) -> ManifestList:
        """GET /v1/manifests: newest first (``before``: only older turns); page on by passing
        a page's ``next_cursor`` as ``cursor``."""
        return await self._send(Call(
            method="GET", path="/v1/manifests", read=model(ManifestList), idempotent=True,
            params={"session_id": session_id, "task_id": task_id, "limit": limit,
                    "before": before, "cursor": cursor}))

    async def explain(self, turn_id: str, ref: str) -> Explanation:
        """GET /v1/manifests/{turn_id}/explain (ops or admin key): which stage kept ``ref``
        out of the turn, and why, or that it was never a candidate."""
        return await self._send(Call(
            method="GET", path=path("/v1/manifests/{}/explain", turn_id),
            read=model(Explanation), idempotent=True, params={"ref": ref}))

    async def replay(self, *, turn_ids: Sequence[str] = (), session_id: str | None = None,
                     turn_id_from: str | None = None, turn_id_to: str | None = None,
                     limit: int | None = None,
                     variants: Sequence[Mapping[str, Any]] = ()) -> Replay:
        """POST /v1/replays (ops or admin key): the tenant's recorded turns assembled again as
        dry runs under ``variants`` (name, budget, retrieval, redaction_profile,
        bundle_revision, compaction), compared by refs, tokens and hashes. Writes nothing,
        so it is retried like a read."""
        return await self._send(Call(
            method="POST", path="/v1/replays", read=model(Replay), idempotent=True,
            body=body(turn_ids=list(turn_ids), session_id=session_id,
                      turn_id_from=turn_id_from, turn_id_to=turn_id_to, limit=limit,
                      variants=[dict(v) for v in variants])))

    async def list_audit(self, *, turn_id: str | None = None, limit: int | None = None
                         ) -> AuditList:
        """GET /v1/audit (ops or admin key): permission drops and memory recalls."""
        return await self._send(Call(
            method="GET", path="/v1/audit", read=model(AuditList), idempotent=True,
            params={"turn_id": turn_id, "limit": limit}))

    # --- erasures ---------------------------------------------------------------------------

    async def request_erasure(self, user_id: str, *, reason: str | None = None
                              ) -> ErasureAccepted:
        """POST /v1/erasures (admin key): erase a user from every layer. Retried on 503/429:
        the server answers the user's open job again, and a second erasure finds nothing."""
        return await self._send(Call(
            method="POST", path="/v1/erasures", read=model(ErasureAccepted), idempotent=True,
            body=body(user_id=user_id, reason=reason)))

    async def get_erasure(self, erasure_id: str) -> Erasure:
        """GET /v1/erasures/{id} (ops or admin key): status and, once finished, receipt."""
        return await self._send(Call(
            method="GET", path=path("/v1/erasures/{}", erasure_id), read=model(Erasure),
            idempotent=True))

    # --- platform admin (api_key: the admin token) ------------------------------------------

    async def create_key(self, *, tenant_id: str, role: Role,
                         max_data_level: DataLevel | None = None,
                         domains: Sequence[str] | None = None,
                         max_session_visibility: Visibility | None = None,
                         name: str | None = None) -> KeyCreated:
        """POST /v1/admin/keys: a new tenant key (``api_key`` is shown only here). Sent
        once."""
        return await self._send(Call(
            method="POST", path="/v1/admin/keys", read=model(KeyCreated),
            body=body(tenant_id=tenant_id, role=role, max_data_level=max_data_level,
                      domains=domains, max_session_visibility=max_session_visibility,
                      name=name)))

    async def list_keys(self, *, tenant_id: str | None = None) -> KeyList:
        """GET /v1/admin/keys: every key (of ``tenant_id``), revoked ones too; no secrets."""
        return await self._send(Call(
            method="GET", path="/v1/admin/keys", read=model(KeyList), idempotent=True,
            params={"tenant_id": tenant_id}))

    async def revoke_key(self, key_id: str) -> None:
        """DELETE /v1/admin/keys/{key_id}."""
        return await self._send(Call(
            method="DELETE", path=path("/v1/admin/keys/{}", key_id), read=nothing,
            idempotent=True))

    async def create_canary(self, *, tenant_id: str, text: str, user_id: str | None = None,
                            label: str | None = None) -> Canary:
        """POST /v1/admin/canaries: register a leakage canary planted in ``tenant_id``'s (or
        ``user_id``'s) data; it counts wherever else an envelope holds it. Sent once."""
        return await self._send(Call(
            method="POST", path="/v1/admin/canaries", read=model(Canary),
            body=body(tenant_id=tenant_id, user_id=user_id, label=label, text=text)))

    async def list_canaries(self, *, tenant_id: str | None = None) -> CanaryList:
        """GET /v1/admin/canaries: every registered canary (of ``tenant_id``)."""
        return await self._send(Call(
            method="GET", path="/v1/admin/canaries", read=model(CanaryList), idempotent=True,
            params={"tenant_id": tenant_id}))

    async def delete_canary(self, canary_id: str) -> None:
        """DELETE /v1/admin/canaries/{canary_id}."""
        return await self._send(Call(
            method="DELETE", path=path("/v1/admin/canaries/{}", canary_id), read=nothing,
            idempotent=True))

    async def put_tenant_identity(self, tenant_id: str, *, algorithm: str, key: str,
                                  require_assertion: bool | None = None,
                                  issuer: str | None = None, audience: str | None = None
                                  ) -> None:
        """PUT /v1/admin/tenants/{tenant}/identity: require (or stop requiring) signed
        end-user assertions (HS256 secret or RS256 public key)."""
        return await self._send(Call(
            method="PUT", path=path("/v1/admin/tenants/{}/identity", tenant_id), read=nothing,
            idempotent=True,
            body=body(require_assertion=require_assertion, algorithm=algorithm, key=key,
                      issuer=issuer, audience=audience)))

    async def embeddings_report(self, *, tenant_id: str | None = None) -> EmbeddingsReport:
        """GET /v1/admin/embeddings: per table, vectors current / stale / client-supplied /
        pending against the configured embedder (of ``tenant_id``'s rows only, if given),
        and whether re-embedding runs."""
        return await self._send(Call(method="GET", path="/v1/admin/embeddings",
                                     read=model(EmbeddingsReport), idempotent=True,
                                     params={"tenant_id": tenant_id}))

    async def get_tenant_settings(self, tenant_id: str) -> TenantSettings:
        """GET /v1/admin/tenants/{tenant}/settings: the tenant's defaults for its turns."""
        return await self._send(Call(
            method="GET", path=path("/v1/admin/tenants/{}/settings", tenant_id),
            read=model(TenantSettings), idempotent=True))

    async def put_tenant_settings(self, tenant_id: str, *,
                                  default_session_visibility: str,
                                  bundle_release_gate: str | None = None) -> None:
        """PUT /v1/admin/tenants/{tenant}/settings (replaces them all): e.g.
        ``default_session_visibility="all"`` lets a new session recall the user's earlier ones
        (each key's cap still applies); ``bundle_release_gate="full"`` makes promotion need an
        approval and a passing evaluation (default ``"lint"``)."""
        return await self._send(Call(
            method="PUT", path=path("/v1/admin/tenants/{}/settings", tenant_id), read=nothing,
            idempotent=True, body=body(default_session_visibility=default_session_visibility,
                                       bundle_release_gate=bundle_release_gate)))

    # --- health -----------------------------------------------------------------------------

    async def healthz(self) -> Health:
        """GET /healthz: the process is up."""
        return await self._send(Call(method="GET", path="/healthz", read=model(Health),
                                     idempotent=True))

    async def readyz(self) -> Readiness:
        """GET /readyz: the stores are reachable. A 503 is an answer here
        (``Readiness.ok`` False, per-store ``checks``), not an error, and is not retried."""
        return await self._send(Call(method="GET", path="/readyz", read=model(Readiness),
                                     accept=frozenset({503})))

    async def metrics(self) -> str:
        """GET /metrics: the Prometheus text exposition."""
        return await self._send(Call(method="GET", path="/metrics", read=read_text,
                                     idempotent=True))

