"""Stage 1 — resolve the identity and scope of one turn.

Contract: ``resolve_scope(principal, request)`` returns the ``Scope`` every later guard and
store query is bounded by, or raises ``ForbiddenScope``. The tenant always comes from the key,
never from the body. The key caps the turn: only a ``runtime`` key may assemble; the requested
``data_level`` may not exceed the key's maximum; a domain-restricted key must name one of its
domains (a restricted key asking for no domain would widen its reach, so that is forbidden too);
``session_visibility`` may not exceed the key's cap and defaults to the tenant's default
(``tree`` unless the tenant widened it), bounded by the cap.
"""

from __future__ import annotations

from app.core.errors import ForbiddenScope
from app.core.model import Principal, Role, Scope, TaskCheckpoint, TurnRequest, Visibility


def _check_allowed(principal: Principal, request: TurnRequest) -> None:
    if principal.role is not Role.RUNTIME:
        raise ForbiddenScope(f"role {principal.role.value!r} may not assemble context")
    if request.data_level > principal.max_data_level:
        raise ForbiddenScope(
            f"data_level {request.data_level.label!r} exceeds the key's maximum "
            f"{principal.max_data_level.label!r}"
        )
    if principal.domains is None:
        return
    if request.domain is None:
        raise ForbiddenScope("this key is restricted to named domains; the turn must name one")
    if request.domain not in principal.domains:
        raise ForbiddenScope(f"domain {request.domain!r} is outside the key's domains")


def _visibility(principal: Principal, request: TurnRequest) -> Visibility:
    cap = principal.max_session_visibility
    if request.session_visibility is None:
        return min(principal.default_session_visibility, cap)
    if request.session_visibility > cap:
        raise ForbiddenScope(
            f"session_visibility {request.session_visibility.label!r} exceeds the key's "
            f"maximum {cap.label!r}")
    return request.session_visibility


def resolve_scope(principal: Principal, request: TurnRequest) -> Scope:
    _check_allowed(principal, request)
    return Scope(
        session_visibility=_visibility(principal, request),
        tenant_id=principal.tenant_id,
        key_id=principal.key_id,
        user_id=request.user_id,
        groups=request.groups,
        domain=request.domain,
        data_level=request.data_level,
        session_id=request.session_id,
        task_id=request.task_id,
        purpose=request.purpose,
    )


def check_task_admission(scope: Scope, checkpoint: TaskCheckpoint | None) -> None:
    """A turn on a task may not ask for more than the task (and so its parents) was admitted
    with: a sub-task reads only what its parent task was allowed."""
    admission = checkpoint.admission if checkpoint is not None else None
    if admission is None:
        return
    if scope.data_level > admission.max_level:
        raise ForbiddenScope(f"data_level {scope.data_level.label!r} exceeds the task's "
                             f"admission {admission.max_level.label!r}")
    if admission.domains is not None and scope.domain not in admission.domains:
        raise ForbiddenScope("the turn's domain is outside the task's admission")
