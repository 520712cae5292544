from __future__ import annotations

from datetime import timedelta

import pytest

from app.core.guards.permission import permission_guard
from app.core.model import Acl, Candidate, DataLevel, DropLayer, Freshness
from tests.unit.builders import NOW, cand, scope


def verdict(c: Candidate) -> str | None:
    kept, dropped = permission_guard(scope(), [c], now=NOW)
    assert len(kept) + len(dropped) == 1
    return dropped[0].type if dropped else None


def test_labelled_candidate_of_the_tenant_passes() -> None:
    assert verdict(cand()) is None


@pytest.mark.parametrize(
    ("c", "expected"),
    [
        (cand(tenant_id=None), "dropped.permission.tenant"),
        (cand(tenant_id="t_other"), "dropped.permission.tenant"),
        (cand(sensitivity=None), "dropped.permission.unlabeled"),
        (cand(acl=None), "dropped.permission.unlabeled"),
        (cand(acl=Acl(whole_tenant=False, users=("bob",), groups=("hr",))),
         "dropped.permission.acl"),
        (cand(acl=Acl(whole_tenant=False)), "dropped.permission.acl"),
        (cand(owner_user_id="bob"), "dropped.permission.owner"),
        (cand(domain="hr"), "dropped.permission.domain"),
        (cand(freshness=Freshness(expires_at=NOW)), "dropped.permission.expired"),
        (cand(freshness=Freshness(expires_at=NOW - timedelta(seconds=1))),
         "dropped.permission.expired"),
    ],
)
def test_fail_closed_rules(c: Candidate, expected: str) -> None:
    assert verdict(c) == expected


@pytest.mark.parametrize(
    "c",
    [
        cand(acl=Acl(whole_tenant=False, users=("alice",))),
        cand(acl=Acl(whole_tenant=False, groups=("other", "payments-oncall"))),
        cand(owner_user_id="alice"),
        cand(domain="payments"),
        cand(freshness=Freshness(expires_at=NOW + timedelta(seconds=1))),
    ],
)
def test_allowed_labels(c: Candidate) -> None:
    assert verdict(c) is None


def test_domain_content_is_denied_to_a_turn_without_domain() -> None:
    kept, dropped = permission_guard(scope(domain=None), [cand(domain="payments")], now=NOW)
    assert not kept
    assert dropped[0].type == "dropped.permission.domain"


def test_first_failing_rule_wins_and_drop_is_machine_readable() -> None:
    c = cand(ref="kb://x", tenant_id="t_other", sensitivity=None, owner_user_id="bob")
    _, dropped = permission_guard(scope(), [c], now=NOW)
    d = dropped[0]
    assert (d.ref, d.kind, d.layer, d.type) == (c.ref, c.kind, DropLayer.PERMISSION,
                                                "dropped.permission.tenant")


def test_reason_names_missing_labels_not_content() -> None:
    c = cand(content="the secret plan", sensitivity=None, acl=None)
    _, dropped = permission_guard(scope(), [c], now=NOW)
    assert dropped[0].reason == "missing labels: sensitivity, acl"


def test_keeps_input_order_and_does_not_touch_survivors() -> None:
    a, b, c = cand("a"), cand("b", tenant_id=None), cand("c", sensitivity=DataLevel.SECRET)
    kept, dropped = permission_guard(scope(), [a, b, c], now=NOW)
    assert kept == [a, c]  # sensitivity level is the safety guard's business
    assert [d.ref for d in dropped] == ["b"]
