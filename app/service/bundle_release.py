"""Releasing bundle revisions: reviews, evaluations, the release gate, promotion, shadow.

The gate (``app.core.release_gate``) is the tenant's ``bundle_release_gate`` setting:

* ``lint`` (the default) — a revision with a blocking lint finding is refused (409
  ``bundle-lint-blocked``). A single developer's runtime setup pushes and promotes from a
  hook (``ctxgate bundles push --promote``) with one key: there is no second reviewer and no
  evaluation run to wait for, so the default must not require them.
* ``full`` — for production tenants: lint, plus an approval by another admin or ops key than
  the one that registered the revision (409 ``bundle-not-approved``), plus a passing
  evaluation of every suite run against the live revision (409 ``bundle-eval-missing`` /
  ``bundle-eval-failed``).

An admin's ``override_reason`` promotes despite every unmet check; the override is written to
the audit log (``bundle.promote_override``: who, which revision, the reason, each check
overridden and, for lint, the finding types and paths — never rule text). Reviews are
audited too (``bundle.approved`` / ``bundle.rejected``).

Shadow: a revision set in shadow for a cohort (a share of sessions and/or named agents, drawn
apart from the canary's) is resolved beside the served revision on that cohort's turns and
recorded in their manifests, never served (``BundleService.admit``). It needs no gate: its
text reaches no model. A promotion of the shadowed revision, or its revocation, ends it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from app.core.errors import Conflict, ForbiddenScope, InvalidRequest, NotFound
from app.core.registry import BundleRevision, Channel
from app.core.release_gate import (
    Decision,
    Evaluation,
    GateRecord,
    Review,
    Unmet,
    may_review,
    unmet,
)
from app.ports import AuditLog, AuditRecord, BundleStore, TenantSettingsSource
from app.service.bundles import BundleRevoked


class LintBlocked(Conflict):
    type = "bundle-lint-blocked"


class NotApproved(Conflict):
    type = "bundle-not-approved"


class EvalMissing(Conflict):
    type = "bundle-eval-missing"


class EvalFailed(Conflict):
    type = "bundle-eval-failed"


class FourEyes(ForbiddenScope):
    type = "bundle-four-eyes"


def _refusal(revision: str, first: Unmet) -> Conflict:
    """The 409 for the first unmet check, with what would clear it."""
    hint = "; or promote with an override_reason"
    if first.check == "lint":
        kinds = ", ".join(sorted({f"{f['type']} in {f['path']}"
                                  for f in first.detail["findings"]}))
        return LintBlocked(f"revision {revision!r} has blocking lint findings ({kinds}); fix "
                           f"them{hint}")
    if first.check == "approval":
        state = ("was rejected" if first.kind == "rejected"
                 else "has no approval")
        return NotApproved(f"revision {revision!r} {state}: another admin or ops key than the "
                           f"one that registered it must approve it{hint}")
    live = first.detail["against_revision"]
    against = f"against the live revision {live!r}" if live else "(nothing is live yet)"
    if first.kind == "failed":
        suites = ", ".join(first.detail["suites"])
        return EvalFailed(f"revision {revision!r} failed evaluation {against}: {suites}{hint}")
    return EvalMissing(f"revision {revision!r} has no evaluation {against}; record one with "
                       f"POST .../evaluations{hint}")


class BundleReleases:
    def __init__(self, store: BundleStore, *, settings: TenantSettingsSource,
                 audit: AuditLog) -> None:
        self._store = store
        self._settings = settings
        self._audit = audit

    async def _get(self, tenant_id: str, bundle_id: str, revision: str) -> BundleRevision:
        rev = await self._store.get(tenant_id=tenant_id, bundle_id=bundle_id,
                                    revision=revision)
        if rev is None:
            raise NotFound(f"no bundle revision {bundle_id!r}@{revision!r}")
        return rev

    async def record(self, *, tenant_id: str, bundle_id: str, revision: str) -> GateRecord:
        return await self._store.gate_record(tenant_id=tenant_id, bundle_id=bundle_id,
                                             revision=revision)

    async def review(self, *, tenant_id: str, bundle_id: str, revision: str,
                     decision: Decision, reviewer: str, note: str | None) -> Review:
        """Approve or reject; the newest decision counts. Four eyes: the registering key may
        not review its own revision (403 ``bundle-four-eyes``)."""
        rev = await self._get(tenant_id, bundle_id, revision)
        if rev.revoked and decision == "approved":
            raise BundleRevoked(f"revision {revision!r} is revoked and cannot be approved")
        if not may_review(registered_by=rev.registered_by, reviewer=reviewer):
            raise FourEyes(f"the key that registered revision {revision!r} may not review it: "
                           "another admin or ops key must")
        saved = await self._store.review(
            tenant_id=tenant_id, bundle_id=bundle_id, revision=revision,
            review=Review(decision=decision, reviewer=reviewer, note=note))
        await self._audit.write(tenant_id=tenant_id, records=[AuditRecord(
            turn_id=None, kind=f"bundle.{decision}", principal=reviewer,
            ref=f"bundle://{bundle_id}@{revision}", rule=None,
            detail={"note": note, "registered_by": rev.registered_by})])
        return saved

    async def evaluate(self, *, tenant_id: str, bundle_id: str, revision: str,
                       evaluation: Evaluation) -> Evaluation:
        """Record a suite's result for ``revision`` (against another revision or none)."""
        await self._get(tenant_id, bundle_id, revision)
        against = evaluation.against_revision
        if against is not None and await self._store.get(
                tenant_id=tenant_id, bundle_id=bundle_id, revision=against) is None:
            raise InvalidRequest(f"against_revision {against!r} is not a revision of "
                                 f"{bundle_id!r}")
        return await self._store.evaluate(tenant_id=tenant_id, bundle_id=bundle_id,
                                          revision=revision, evaluation=evaluation)

    async def promote(self, *, tenant_id: str, bundle_id: str, revision: str,
                      share: float | None, agents: Sequence[str], actor: str,
                      override_reason: str | None = None) -> Channel:
        """Roll ``revision`` out (fully, or to a canary cohort) if the tenant's gate passes,
        or despite it with ``override_reason`` (admin routes only), which is audited."""
        rev = await self._get(tenant_id, bundle_id, revision)
        if rev.revoked:
            raise BundleRevoked(f"revision {revision!r} is revoked and cannot be promoted")
        gate = (await self._settings.tenant_settings(tenant_id=tenant_id)).bundle_release_gate
        current = await self._store.channel(tenant_id=tenant_id, bundle_id=bundle_id)
        current = current or Channel(stable=None)
        record = (await self.record(tenant_id=tenant_id, bundle_id=bundle_id,
                                    revision=revision) if gate == "full" else GateRecord())
        failing = unmet(gate, revision=revision, lint=rev.lint, record=record,
                        live=current.stable)
        if failing and not override_reason:
            raise _refusal(revision, failing[0])
        # Promoting the shadowed revision ends the shadow: it would be compared with itself.
        kept = current if current.shadow != revision else replace(
            current, shadow=None, shadow_share=0.0, shadow_agents=())
        if share is None and not agents:  # full rollout ends any canary
            channel = replace(kept, stable=revision, canary=None, canary_share=0.0,
                              canary_agents=())
        else:
            channel = replace(kept, stable=current.stable or revision, canary=revision,
                              canary_share=share or 0.0, canary_agents=tuple(agents))
        await self._store.set_channel(tenant_id=tenant_id, bundle_id=bundle_id,
                                      channel=channel)
        if failing:  # after the rollout took effect: the record says what happened
            await self._audit.write(tenant_id=tenant_id, records=[AuditRecord(
                turn_id=None, kind="bundle.promote_override", principal=actor,
                ref=f"bundle://{bundle_id}@{revision}", rule=None,
                detail=_override(gate, override_reason, failing))])
        return channel

    async def shadow(self, *, tenant_id: str, bundle_id: str, revision: str | None,
                     share: float, agents: Sequence[str]) -> Channel:
        """Resolve ``revision`` beside the served one for a cohort (None: end the shadow)."""
        current = await self._store.channel(tenant_id=tenant_id, bundle_id=bundle_id)
        if revision is None and current is None:
            raise NotFound(f"bundle {bundle_id!r} has no channel")
        if revision is not None:
            rev = await self._get(tenant_id, bundle_id, revision)
            if rev.revoked:
                raise BundleRevoked(f"revision {revision!r} is revoked")
            if current is not None and revision in (current.stable, current.canary):
                raise Conflict(f"revision {revision!r} is already served: a shadow is "
                               "compared with what is served")
        channel = replace(current or Channel(stable=None), shadow=revision,
                          shadow_share=share if revision else 0.0,
                          shadow_agents=tuple(agents) if revision else ())
        await self._store.set_channel(tenant_id=tenant_id, bundle_id=bundle_id,
                                      channel=channel)
        return channel


def _override(gate: str, reason: str | None, failing: Sequence[Unmet]) -> dict[str, object]:
    detail: dict[str, object] = {
        "reason": reason, "gate": gate,
        "overridden": [{"check": u.check, "kind": u.kind,
                        **{k: v for k, v in u.detail.items() if k != "findings"}}
                       for u in failing]}
    for u in failing:
        if u.check == "lint":
            detail["findings"] = u.detail["findings"]
    return detail
