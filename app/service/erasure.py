"""'Forget me': erase one user of a tenant from every layer, as a durable, verified job.

``request`` inserts a ``pending`` job (or returns the user's open one: two requests at once
make one job) and kicks the worker. ``run`` claims a job (``running``, attempts + 1) and
stores the ids it will need (``plan``, merged with what earlier jobs of the same user planned:
their rows may be gone, their cached keys not). Every attempt then runs *every* ``Eraser``
step (each idempotent, recording its own counts) and asks *every* layer what is left, a layer
that cannot be reached included: its step and its check are attempted, their failure
recorded. The job is ``done`` only when every layer answered and reported zero. Otherwise it
stays open with a receipt that says so per layer (``status``: ``verified``, ``remaining`` or
``unreachable`` with the error's type) and ``verified: false``, and is run again after a
backoff (``RETRY_BASE_S`` doubling to ``RETRY_MAX_S``): a receipt never claims what was not
checked. On ``done`` the job's ``user_id`` becomes the tombstone, and an ``erasure.completed``
audit record (principal: the requesting key, subject: the tombstone) goes in the same
transaction. ``ErasureWorker`` polls the open jobs (a job left ``running`` by a crash is
resumed), sleeping ``interval_s`` or until ``kick()``. See ``docs/erasure.md``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from app.core.errors import NotFound
from app.core.model import Principal
from app.ports import AuditRecord, Eraser, ErasureJob, ErasureStore
from app.service.background import Poller

log = logging.getLogger(__name__)

RETRY_BASE_S = 1.0
RETRY_MAX_S = 300.0
DERIVED = ("Embeddings (vector columns) and full-text rows (tsvector columns) are stored in the "
           "same rows as the content they derive from (knowledge_chunks, session_events, "
           "memories): deleting those rows deleted them; no separate index holds content.")
RETAINED = [
    {"what": "audit record erasure.completed", "why": "proof that the erasure ran; it names "
     "the requesting key and the tombstone, never the user id; kept for the audit "
     "retention (audit_retention_days, docs/retention.md)"},
    {"what": "manifests of the user's turns (user id tombstoned, stored responses cleared)",
     "why": "they hold refs, token counts and content hashes, no content; kept for the "
     "manifest retention (manifest_retention_days) as the tenant's audit trail"},
    {"what": "audit records of the user's turns (user id tombstoned)", "why": "permission "
     "decisions stay auditable; refs name documents, not their content; kept for the audit "
     "retention"},
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


def _layer_status(left: int | None) -> str:
    return "unreachable" if left is None else "verified" if left == 0 else "remaining"


def build_receipt(job: ErasureJob, remaining: dict[str, int | None],
                  errors: dict[str, str]) -> dict[str, Any]:
    """``remaining``: what each layer reported left (None: it could not be asked);
    ``errors``: the type of what failed, per layer. Verified only when every layer answered
    zero and nothing failed."""
    layers: dict[str, Any] = {}
    for layer, left in remaining.items():
        got = job.receipt.get("layers", {}).get(layer, {})
        layers[layer] = {"found": got.get("found", 0), "erased": got.get("erased", 0),
                         "verified_remaining": left, "status": _layer_status(left),
                         "tables": got.get("tables", {})}
        if layer in errors:
            layers[layer]["error"] = errors[layer]
    receipt: dict[str, Any] = {
        **{k: v for k, v in job.receipt.items() if k == "plan"},
        "erasure_id": job.erasure_id, "subject": tombstone(job.tenant_id, job.user_id),
        "attempts": job.attempts, "layers": layers, "derived": DERIVED,
        "retained": RETAINED,
        "verified": not errors and all(left == 0 for left in remaining.values()),
        "checked_at": datetime.now(UTC).isoformat(),
    }
    if errors:
        receipt["errors"] = dict(sorted(errors.items()))
    return receipt


def retry_delay(attempts: int) -> float:
    """Seconds before an unverified job's next attempt."""
    return float(min(RETRY_MAX_S, RETRY_BASE_S * 2.0 ** max(0, attempts - 1)))


class ErasureService:
    def __init__(self, store: ErasureStore, steps: Sequence[Eraser],
                 verify: Sequence[Eraser] | None = None) -> None:
        self._store = store
        self._steps = tuple(steps)
        self._verify = tuple(verify if verify is not None else steps)
        self._due: dict[str, float] = {}  # erasure_id -> when an unverified job runs again
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

    async def run_open(self, now: Callable[[], float] = time.monotonic) -> int:
        """Run every open job that is due once; returns how many were claimed."""
        ran = 0
        for tenant_id, erasure_id in await self._store.open_jobs():
            if self._due.get(erasure_id, 0.0) <= now():
                ran += await self.run(tenant_id=tenant_id, erasure_id=erasure_id, now=now)
        return ran

    async def run(self, *, tenant_id: str, erasure_id: str,
                  now: Callable[[], float] = time.monotonic) -> bool:
        async with self._store.claim(tenant_id=tenant_id, erasure_id=erasure_id) as job:
            if job is None:
                return False
            try:
                verified = await self._erase(job)
            except Exception:  # the plan could not be made: the job stays open
                log.exception("erasure %s attempt %d failed", erasure_id, job.attempts)
                verified = False
            if verified:
                self._due.pop(erasure_id, None)
            else:
                self._due[erasure_id] = now() + retry_delay(job.attempts)
        return True

    async def _erase(self, job: ErasureJob) -> bool:
        """One attempt: every step, then every layer's check; True once verified."""
        target = await self._store.plan(job=job, tombstone=tombstone(job.tenant_id, job.user_id))
        errors: dict[str, str] = {}
        for step in self._steps:
            try:
                await step.erase(target)
            except Exception as exc:  # this layer is retried; the others still run
                log.warning("erasure %s: layer %s failed: %s", job.erasure_id, step.layer,
                            type(exc).__name__, exc_info=True)
                errors[step.layer] = type(exc).__name__
        remaining: dict[str, int | None] = {}
        for v in self._verify:
            try:
                remaining[v.layer] = await v.remaining(target)
            except Exception as exc:
                remaining[v.layer] = None
                errors.setdefault(v.layer, type(exc).__name__)
        current = await self._store.get(tenant_id=job.tenant_id, erasure_id=job.erasure_id)
        receipt = build_receipt(current or job, remaining, errors)
        if not receipt["verified"]:
            await self._store.postpone(job=job, receipt=receipt)
            return False
        receipt["finished_at"] = receipt["checked_at"]
        await self._finish(job, receipt)
        return True

    async def _finish(self, job: ErasureJob, receipt: dict[str, Any]) -> None:
        tomb = tombstone(job.tenant_id, job.user_id)
        counts = {k: {"found": v["found"], "erased": v["erased"],
                      "verified_remaining": v["verified_remaining"]}
                  for k, v in receipt["layers"].items()}
        audit = AuditRecord(turn_id=None, kind="erasure.completed", principal=job.requested_by,
                            ref=job.erasure_id, rule=None,
                            detail={"subject": tomb, "layers": counts})
        await self._store.finish(job=job, status="done", receipt=receipt, tombstone=tomb,
                                 audit=audit)


class ErasureWorker(Poller):
    """An asyncio task that runs open erasure jobs: every ``interval_s``, or at once on kick."""

    def __init__(self, service: ErasureService, *, interval_s: float = 0.5) -> None:
        super().__init__(service.run_open, interval_s=interval_s,
                         name="ctxgate-erasure-worker")
        service.kick = self.kick
