from __future__ import annotations

from app.core.canaries import Canary, CanaryLeak, CanaryMatcher, classify

A_TENANT = Canary("c-tenant", "tenant-a", None, "NIGHTJAR-7731")
A_ALICE = Canary("c-alice", "tenant-a", "alice", "KESTREL-0042-ALICE")


def matcher() -> CanaryMatcher:
    return CanaryMatcher.build([A_TENANT, A_ALICE])


def test_owner_reading_own_canary_is_not_a_leak() -> None:
    text = "notes: NIGHTJAR-7731 and KESTREL-0042-ALICE"
    assert matcher().leaks(text, tenant_id="tenant-a", user_id="alice") == ()


def test_other_tenant_seeing_canary_is_cross_tenant() -> None:
    leaks = matcher().leaks("x NIGHTJAR-7731 y", tenant_id="tenant-b", user_id="bob")
    assert leaks == (CanaryLeak("c-tenant", "cross_tenant", "tenant-a"),)


def test_other_user_of_same_tenant_seeing_user_canary_is_cross_user() -> None:
    leaks = matcher().leaks("KESTREL-0042-ALICE", tenant_id="tenant-a", user_id="carol")
    assert leaks == (CanaryLeak("c-alice", "cross_user", "tenant-a"),)


def test_tenant_wide_canary_inside_its_tenant_is_not_a_leak() -> None:
    assert matcher().leaks("NIGHTJAR-7731", tenant_id="tenant-a", user_id=None) == ()


def test_repeated_hits_report_each_canary_once_sorted_by_id() -> None:
    text = "KESTREL-0042-ALICE NIGHTJAR-7731 NIGHTJAR-7731 KESTREL-0042-ALICE"
    leaks = matcher().leaks(text, tenant_id="tenant-z", user_id=None)
    assert [leak.canary_id for leak in leaks] == ["c-alice", "c-tenant"]


def test_regex_metacharacters_are_literal() -> None:
    m = CanaryMatcher.build([Canary("c1", "t", None, "a.b*c(d)+[e]")])
    assert m.leaks("aXb*c(d)+[e]", tenant_id="u", user_id=None) == ()
    assert len(m.leaks("a.b*c(d)+[e]", tenant_id="u", user_id=None)) == 1


def test_nested_canaries_are_both_found_when_both_appear() -> None:
    short = Canary("short", "t", None, "ORIOLE-1234")
    long = Canary("long", "t", None, "ORIOLE-1234-EXTRA")
    m = CanaryMatcher.build([short, long])
    assert [x.canary_id for x in m.leaks("ORIOLE-1234-EXTRA", tenant_id="u", user_id=None)] == [
        "long"
    ]
    found = m.leaks("ORIOLE-1234-EXTRA and ORIOLE-1234", tenant_id="u", user_id=None)
    assert [x.canary_id for x in found] == ["long", "short"]


def test_same_text_registered_by_two_tenants_classifies_each() -> None:
    a = Canary("ca", "tenant-a", None, "SHARED-CANARY-1")
    b = Canary("cb", "tenant-b", None, "SHARED-CANARY-1")
    leaks = CanaryMatcher.build([a, b]).leaks("SHARED-CANARY-1", tenant_id="tenant-a", user_id=None)
    assert leaks == (CanaryLeak("cb", "cross_tenant", "tenant-b"),)


def test_empty_registry_and_empty_text() -> None:
    assert CanaryMatcher.build([]).leaks("anything", tenant_id="t", user_id=None) == ()
    assert matcher().leaks("", tenant_id="t", user_id=None) == ()
    assert len(matcher()) == 2


def test_classify() -> None:
    assert classify(A_ALICE, tenant_id="tenant-a", user_id="alice") is None
    assert classify(A_ALICE, tenant_id="tenant-b", user_id="alice") == "cross_tenant"
    assert classify(A_ALICE, tenant_id="tenant-a", user_id=None) == "cross_user"
