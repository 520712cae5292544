"""Domain errors. They carry a stable machine ``type`` and a human ``detail``, never HTTP.

    DomainError
    ├── InvalidRequest     invalid-request    the body is well-formed but makes no sense
    ├── Unauthorized       unauthorized       no key, an unknown key or a revoked key
    ├── ForbiddenScope     forbidden-scope    the key may not do this or see this scope
    ├── NotFound           not-found          missing, or another tenant's / user's (same answer)
    ├── Conflict           conflict           the id is taken by a different request
    │   └── NotExplainable not-explainable    the turn recorded nothing to re-evaluate against
    ├── StaleRevision      stale-revision     optimistic concurrency lost
    ├── BudgetTooSmall     budget-too-small   never-compress content does not fit
    ├── Overloaded         overloaded         this worker's turns in flight are at its limit
    └── QuotaExceeded      quota-exceeded     the tenant (or key) is past one of its quotas

``app.api.errors`` is the one place that maps these to status codes and problem+json.
"""

from __future__ import annotations

from app.core.quotas import QuotaDecision


class DomainError(Exception):
    type: str = "domain-error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidRequest(DomainError):
    type = "invalid-request"


class Unauthorized(DomainError):
    type = "unauthorized"


class ForbiddenScope(DomainError):
    type = "forbidden-scope"


class NotFound(DomainError):
    type = "not-found"


class Conflict(DomainError):
    type = "conflict"


class NotExplainable(Conflict):
    """Explain cannot re-evaluate a source: the turn's manifest does not cite it and the turn
    recorded no scope (made before explain existed, or its user was erased)."""

    type = "not-explainable"


class StaleRevision(DomainError):
    type = "stale-revision"


class BudgetTooSmall(DomainError):
    type = "budget-too-small"


class Overloaded(DomainError):
    """This worker has as many turns in flight as it admits: shed now, not queue (503)."""

    type = "overloaded"

    def __init__(self, detail: str, *, retry_after_s: float) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class QuotaExceeded(DomainError):
    """The caller's tenant or key is past one of its quotas (429): its own excess, refused
    before it reaches the stores, so other tenants keep their share (docs/quotas.md)."""

    type = "quota-exceeded"

    def __init__(self, detail: str, *, retry_after_s: float, decision: QuotaDecision) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s
        self.decision = decision  # the limiter's answer, for the RateLimit headers
