"""'Forget me': erase one user of a tenant from every layer, as a durable, verified job.

``request`` inserts a ``pending`` job (or returns the user's open one) and kicks the worker.
``run`` claims a job (``running``, attempts + 1), stores the ids it will need (``plan``),
runs each ``Eraser`` step in order — each idempotent and recording its own counts — then a
verification pass asks *every* layer (not only the steps that ran) what is left. Only when
all report zero is the job ``done``; otherwise ``failed``, naming what remained. Either way the
receipt is written, the job's ``user_id`` becomes the tombstone, and an ``erasure.<status>``
audit record (principal: the requesting key, subject: the tombstone) goes in the same
transaction. ``ErasureWorker`` polls the open jobs (a job left ``running`` by a crash is
resumed), sleeping ``interval_s`` or until ``kick()``. See ``docs/erasure.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from app.core.errors import NotFound
from app.core.model import Principal
from app.ports import AuditRecord, Eraser, ErasureJob, ErasureStore, ErasureTarget

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
DERIVED = ("Embeddings (vector columns) and full-text rows (tsvector columns) are stored in the "
           "same rows as the content they derive from (knowledge_chunks, session_events, "
           "memories): deleting those rows deleted them; no separate index holds content.")
RETAINED = [
    {"what": "audit record erasure.completed", "why": "proof that the erasure ran; it names "
     "the requesting key and the tombstone, never the user id"},
    {"what": "manifests of the user's turns (user id tombstoned)", "why": "they hold refs, "
     "token counts and content hashes, no content; kept for the tenant's audit trail"},
    {"what": "audit records of the user's turns (user id tombstoned)", "why": "permission "
     "decisions stay auditable; refs name documents, not their content"},
    {"what": "team memories the user owned (owner tombstoned)", "why": "a team fact belongs "
     "to the team; its statement stays, its link to the user does not"},
    {"what": "knowledge documents shared with others (user removed from the ACL)", "why":
     "the other readers' access stays; the user can no longer read them"},
    {"what": "this job row (user id tombstoned)", "why": "the receipt must stay retrievable"},
]


def tombstone(tenant_id: str, user_id: str) -> str:
    """A stable pseudonym for an erased user: the same within a tenant, not reversible."""
    digest = hashlib.sha256(f"{tenant_id}|{user_id}".encode()).hexdigest()
    return f"erased:{digest[:12]}"


def build_receipt(job: ErasureJob, remaining: dict[str, int], error: str | None
                  ) -> dict[str, Any]:
    layers: dict[str, Any] = {}
    for layer, left in remaining.items():
        got = job.receipt.get("layers", {}).get(layer, {})
        layers[layer] = {"found": got.get("found", 0), "erased": got.get("erased", 0),
                         "verified_remaining": left, "tables": got.get("tables", {})}
    receipt: dict[str, Any] = {
        "erasure_id": job.erasure_id, "subject": tombstone(job.tenant_id, job.user_id),
        "attempts": job.attempts, "layers": layers, "derived": DERIVED,
        "retained": RETAINED, "verified": error is None and not any(remaining.values()),
        "finished_at": datetime.now(UTC).isoformat(),
    }
    if error is not None:
        receipt["error"] = error
    return receipt


class ErasureService:
    def __init__(self, store: ErasureStore, steps: Sequence[Eraser],
                 verify: Sequence[Eraser] | None = None) -> None:
        self._store = store
        self._steps = tuple(steps)
        self._verify = tuple(verify if verify is not None else steps)
        self.kick: Callable[[], None] = lambda: None  # ErasureWorker sets its own

    async def request(self, *, principal: Principal, user_id: str) -> ErasureJob:
        job = await self._store.create(tenant_id=principal.tenant_id, user_id=user_id,
                                       requested_by=principal.key_id)
        self.kick()
        return job

    async def get(self, *, principal: Principal, erasure_id: str) -> ErasureJob:
        job = await self._store.get(tenant_id=principal.tenant_id, erasure_id=erasure_id)
        if job is None:
            raise NotFound(f"no erasure {erasure_id!r}")
        return job

    async def run_open(self) -> int:
        """Run every open job once; returns how many were claimed."""
        ran = 0
        for tenant_id, erasure_id in await self._store.open_jobs():
            ran += await self.run(tenant_id=tenant_id, erasure_id=erasure_id)
        return ran

    async def run(self, *, tenant_id: str, erasure_id: str) -> bool:
        async with self._store.claim(tenant_id=tenant_id, erasure_id=erasure_id) as job:
            if job is None:
                return False
            try:
                await self._erase(job)
            except Exception as exc:  # the job stays running: the next poll resumes it
                log.exception("erasure %s attempt %d failed", erasure_id, job.attempts)
                if job.attempts >= MAX_ATTEMPTS:
                    await self._finish(job, None, error=type(exc).__name__)
        return True

    async def _erase(self, job: ErasureJob) -> None:
        target = await self._store.plan(job=job, tombstone=tombstone(job.tenant_id, job.user_id))
        for step in self._steps:
            await step.erase(target)
        await self._finish(job, target, error=None)

    async def _finish(self, job: ErasureJob, target: ErasureTarget | None, *,
                      error: str | None) -> None:
        tomb = tombstone(job.tenant_id, job.user_id)
        remaining: dict[str, int] = {}
        if target is not None:
            for v in self._verify:
                remaining[v.layer] = await v.remaining(target)
        current = await self._store.get(tenant_id=job.tenant_id, erasure_id=job.erasure_id)
        receipt = build_receipt(current or job, remaining, error)
        status = "done" if receipt["verified"] else "failed"
        counts = {k: {"found": v["found"], "erased": v["erased"],
                      "verified_remaining": v["verified_remaining"]}
                  for k, v in receipt["layers"].items()}
        kind = "erasure.completed" if status == "done" else "erasure.failed"
        audit = AuditRecord(turn_id=None, kind=kind, principal=job.requested_by,
                            ref=job.erasure_id, rule=None,
                            detail={"subject": tomb, "layers": counts})
        await self._store.finish(job=job, status=status, receipt=receipt, tombstone=tomb,
                                 audit=audit)


class ErasureWorker:
    """An asyncio task that runs open erasure jobs: every ``interval_s``, or at once on kick."""

    def __init__(self, service: ErasureService, *, interval_s: float = 0.5) -> None:
        self._service = service
        self._interval_s = interval_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        service.kick = self.kick

    def kick(self) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name="ctxgate-erasure-worker")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            try:
                await self._service.run_open()
            except Exception:  # a database hiccup must not end the worker
                log.exception("erasure worker poll failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval_s)
            self._wake.clear()
