"""Stage 2 — the permission guard: who may see what, decided before anything is remembered.

Contract: ``permission_guard(scope, candidates, now=...)`` splits the candidates into those the
turn's principal may read and ``Drop`` records (layer ``permission``). It fails closed: a label
that is unknown (``None``) denies. Rules, first failing rule wins:

    dropped.permission.tenant      tenant unknown or another tenant's
    dropped.permission.unlabeled   sensitivity or ACL unknown
    dropped.permission.acl         restricted ACL without the user or one of the user's groups
    dropped.permission.owner       user-scoped content of another user
    dropped.permission.domain      content of another domain than the turn's
    dropped.permission.expired     ``freshness.expires_at <= now``

Permission drops never reach the manifest (their refs could be an existence oracle); the
pipeline hands them to the audit log. Reasons therefore name rules, never content.

``verdict(scope, c, now)`` is the one predicate: the guard applies it to every candidate, and
explain (``app.core.explain``) applies it to one source it looks up again. The stores push the
same rules down into their SQL (``app.adapters.postgres.knowledge.VISIBLE``, together with
the safety guard's data-level rule, ``level_verdict``); this predicate is the source of
truth, the SQL its pushed-down copy, and a contract test checks that they agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from app.core.model import Candidate, Drop, DropLayer, Scope

_Rule = Callable[[Scope, Candidate, datetime], tuple[str, str] | None]


def _tenant(scope: Scope, c: Candidate, now: datetime) -> tuple[str, str] | None:
    if c.tenant_id is None:
        return "tenant", "tenant label missing"
    if c.tenant_id != scope.tenant_id:
        return "tenant", "belongs to another tenant"
    return None


def _unlabeled(scope: Scope, c: Candidate, now: datetime) -> tuple[str, str] | None:
    if c.sensitivity is None or c.acl is None:
        missing = [n for n, v in (("sensitivity", c.sensitivity), ("acl", c.acl)) if v is None]
        return "unlabeled", f"missing labels: {', '.join(missing)}"
    return None


def _acl(scope: Scope, c: Candidate, now: datetime) -> tuple[str, str] | None:
    acl = c.acl
    if acl is None or acl.whole_tenant:
        return None
    if scope.user_id in acl.users or set(scope.groups) & set(acl.groups):
        return None
    return "acl", "user and groups not in the ACL"


def _owner(scope: Scope, c: Candidate, now: datetime) -> tuple[str, str] | None:
    if c.owner_user_id is not None and c.owner_user_id != scope.user_id:
        return "owner", "owned by another user"
    return None


def _domain(scope: Scope, c: Candidate, now: datetime) -> tuple[str, str] | None:
    if c.domain is not None and c.domain != scope.domain:
        return "domain", "outside the turn's domain"
    return None


def _expired(scope: Scope, c: Candidate, now: datetime) -> tuple[str, str] | None:
    expires = c.freshness.expires_at
    if expires is not None and expires <= now:
        return "expired", f"expired at {expires.isoformat()}"
    return None


RULES: tuple[_Rule, ...] = (_tenant, _unlabeled, _acl, _owner, _domain, _expired)


def verdict(scope: Scope, c: Candidate, now: datetime) -> tuple[str, str] | None:
    """``(rule, reason)`` of the first rule that denies ``c`` to ``scope`` at ``now``; None:
    allowed."""
    for rule in RULES:  # a plain loop: this runs for every candidate of every turn
        if (v := rule(scope, c, now)) is not None:
            return v
    return None


def permission_guard(
    scope: Scope, candidates: Iterable[Candidate], *, now: datetime
) -> tuple[list[Candidate], list[Drop]]:
    kept: list[Candidate] = []
    dropped: list[Drop] = []
    for c in candidates:
        denied = verdict(scope, c, now)
        if denied is None:
            kept.append(c)
            continue
        rule_name, reason = denied
        dropped.append(
            Drop(ref=c.ref, kind=c.kind, layer=DropLayer.PERMISSION,
                 type=f"dropped.permission.{rule_name}", reason=reason)
        )
    return kept, dropped
