from __future__ import annotations

from typing import Any

import pytest

from app.core.errors import ForbiddenScope
from app.core.model import DataLevel, Principal, Role, TurnRequest
from app.core.scope import resolve_scope
from tests.unit.builders import budget


def principal(**over: Any) -> Principal:
    values: dict[str, Any] = {"key_id": "k1", "tenant_id": "t1", "role": Role.RUNTIME,
                              "max_data_level": DataLevel.CONFIDENTIAL, "domains": None}
    values.update(over)
    return Principal(**values)


def request(**over: Any) -> TurnRequest:
    values: dict[str, Any] = {
        "turn_id": "turn_1", "session_id": "s1", "task_id": "task1", "user_id": "alice",
        "groups": ("g1",), "domain": "payments", "data_level": DataLevel.INTERNAL,
        "query": "why?", "query_embedding": None, "budget": budget(1000, 100),
        "redaction_profile": None,
    }
    values.update(over)
    return TurnRequest(**values)


def test_scope_takes_tenant_from_key_and_identity_from_request() -> None:
    s = resolve_scope(principal(), request())
    assert (s.tenant_id, s.key_id, s.user_id) == ("t1", "k1", "alice")
    assert (s.groups, s.domain, s.data_level) == (("g1",), "payments", DataLevel.INTERNAL)
    assert (s.session_id, s.task_id) == ("s1", "task1")


@pytest.mark.parametrize("role", [Role.OPS, Role.ADMIN])
def test_only_runtime_may_assemble(role: Role) -> None:
    with pytest.raises(ForbiddenScope):
        resolve_scope(principal(role=role), request())


def test_data_level_above_key_maximum_is_forbidden() -> None:
    with pytest.raises(ForbiddenScope, match="exceeds"):
        resolve_scope(principal(), request(data_level=DataLevel.SECRET))


def test_data_level_equal_to_key_maximum_is_allowed() -> None:
    assert resolve_scope(principal(), request(data_level=DataLevel.CONFIDENTIAL))


def test_restricted_key_must_name_one_of_its_domains() -> None:
    p = principal(domains=("payments", "billing"))
    assert resolve_scope(p, request(domain="billing")).domain == "billing"
    with pytest.raises(ForbiddenScope, match="outside"):
        resolve_scope(p, request(domain="hr"))
    with pytest.raises(ForbiddenScope, match="must name"):
        resolve_scope(p, request(domain=None))


def test_unrestricted_key_may_ask_for_no_domain() -> None:
    assert resolve_scope(principal(), request(domain=None)).domain is None


def test_forbidden_scope_carries_its_type() -> None:
    with pytest.raises(ForbiddenScope) as err:
        resolve_scope(principal(role=Role.OPS), request())
    assert err.value.type == "forbidden-scope"
    assert "ops" in err.value.detail
