from __future__ import annotations

import pytest

from app.core.errors import InvalidRequest
from app.core.redaction import (
    BUILTIN_PROFILES,
    DEFAULT_PROFILE,
    RedactionProfile,
    profiles_from_json,
    resolve_profile,
)


def test_builtin_profiles_give_their_documented_actions() -> None:
    def act(profile: str, type_: str) -> str:
        return BUILTIN_PROFILES[profile].action_for(type_, "mask")

    assert act("default", "secret.jwt") == "drop"
    assert act("default", "pii.email") == "mask"
    assert act("default", "injection.role") == "quarantine"
    assert act("internal-engineering", "pii.email") == "allow"
    assert act("internal-engineering", "pii.ip_address") == "allow"
    assert act("internal-engineering", "pii.phone") == "mask"
    assert act("strict", "pii.email") == "drop"
    assert act("strict", "custom.thing") == "drop"
    assert act("customer-support", "pii.email") == "mask"
    assert act("customer-support", "injection.override") == "drop"


def test_longest_prefix_wins_and_prefixes_match_whole_segments() -> None:
    p = RedactionProfile(name="p", actions={"pii": "drop", "pii.email": "allow", "pii.e": "mask"})
    assert p.action_for("pii.email", "mask") == "allow"
    assert p.action_for("pii.phone", "mask") == "drop"
    assert p.action_for("pii", "mask") == "drop"


def test_fallbacks_are_default_secret_then_default_then_the_proposal() -> None:
    p = RedactionProfile(name="p", actions={}, default_secret="mask")
    assert p.action_for("secret.jwt", "drop") == "mask"
    assert p.action_for("other.x", "mask") == "mask"
    assert RedactionProfile(name="q", actions={}, default="drop").action_for("x", "mask") == "drop"


@pytest.mark.parametrize(("actions", "message"), [
    ({"secret.": "allow"}, "never allowed"),
    ({"pii.email": "quarantine"}, "only injection"),
    ({"pii.email": "hide"}, "must be one of"),
    ({"PII": "mask"}, "bad finding type"),
])
def test_invariants_are_checked_on_construction(actions: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RedactionProfile(name="bad", actions=actions)  # type: ignore[arg-type]


def test_actions_are_frozen_copies() -> None:
    source = {"pii.": "mask"}
    p = RedactionProfile(name="p", actions=source)  # type: ignore[arg-type]
    source["pii."] = "drop"
    assert p.actions["pii."] == "mask"
    with pytest.raises(TypeError):
        p.actions["pii."] = "drop"  # type: ignore[index]


def test_profiles_from_json_extends_a_builtin() -> None:
    profiles = profiles_from_json(
        '{"support-eu": {"extends": "default", "actions": {"pii.ip_address": "drop"}}}')
    p = profiles["support-eu"]
    assert p.action_for("pii.ip_address", "mask") == "drop"
    assert p.action_for("pii.email", "mask") == "mask"
    assert p.action_for("injection.role", "quarantine") == "quarantine"


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "not valid JSON"),
    ("[]", "JSON object of name"),
    ('{"default": {}}', "built in"),
    ('{"Bad Name": {}}', "bad profile name"),
    ('{"x": []}', "must be a JSON object"),
    ('{"x": {"colour": "red"}}', "unknown fields"),
    ('{"x": {"extends": "nope"}}', "unknown built-in"),
    ('{"x": {"actions": {"pii.": 1}}}', "map strings to strings"),
    ('{"x": {"actions": {"secret.": "allow"}}}', "never allowed"),
    ('{"x": {"default_secret": ["drop"]}}', "must be one of"),
    ('{"x": {"default": "allow"}}', "default must be"),
])
def test_profiles_from_json_rejects_bad_input(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        profiles_from_json(text)


def test_resolve_profile() -> None:
    custom = profiles_from_json('{"mine": {"actions": {"pii.": "drop"}}}')
    assert resolve_profile(None) is DEFAULT_PROFILE
    assert resolve_profile("strict") is BUILTIN_PROFILES["strict"]
    assert resolve_profile("mine", custom) is custom["mine"]
    with pytest.raises(InvalidRequest, match="unknown redaction profile 'nope'"):
        resolve_profile("nope", custom)
