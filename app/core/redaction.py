"""Redaction profiles: what a detector finding costs, per finding type.

Contract: a ``RedactionProfile`` maps finding types or type prefixes to an action

    mask        replace the span with ``[REDACTED:<type>]``
    drop        leave the whole candidate out (``dropped.safety.*``)
    allow       ignore the finding
    quarantine  keep the candidate, fenced as untrusted data in the dynamic section, labelled
                quarantined — only for ``injection.*`` keys

``action_for(type, proposed)`` picks, in order: the longest matching key of ``actions`` (a key
matches its own type and every type below it: ``pii`` and ``pii.`` both match
``pii.email``, ``pii.e`` matches nothing), then ``default_secret`` for ``secret.*`` types,
then ``default`` when set, else the detector's ``proposed`` action.

Invariants (checked on construction, so a custom profile cannot weaken them): secrets are
never ``allow``-ed (they never reach a model in clear text) and only injection may be
``quarantine``-d. Built-ins: ``default``, ``internal-engineering``, ``strict``,
``customer-support``. ``profiles_from_json`` reads operator profiles (ValueError on bad
input); ``resolve_profile`` turns a request's profile name into a profile (``InvalidRequest``
for an unknown name).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, cast, get_args

from app.core.errors import InvalidRequest

Action = Literal["mask", "drop", "allow", "quarantine"]
ACTIONS: frozenset[str] = frozenset(get_args(Action))
_KEY = re.compile(r"[a-z][a-z0-9_]{0,40}(?:\.[a-z0-9_]{1,40}){0,4}\.?")
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")


def _family(type_: str) -> str:
    return type_.split(".", 1)[0]


def _check(key: str, action: str) -> None:
    if not isinstance(action, str) or action not in ACTIONS:
        raise ValueError(f"action for {key!r} must be one of {sorted(ACTIONS)}, not {action!r}")
    family = _family(key)
    if action == "allow" and family == "secret":
        raise ValueError(f"{key!r}: secrets can be masked or dropped, never allowed")
    if action == "quarantine" and family != "injection":
        raise ValueError(f"{key!r}: only injection findings can be quarantined")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RedactionProfile:
    name: str
    actions: Mapping[str, Action]
    default_secret: Action = "drop"  # noqa: S105 -- an action name, not a credential
    default: Action | None = None  # types no key matches; None: the detector's proposal

    def __post_init__(self) -> None:
        for key, action in self.actions.items():
            if not _KEY.fullmatch(key):
                raise ValueError(f"profile {self.name!r}: bad finding type or prefix {key!r}")
            _check(key, action)
        _check("secret", self.default_secret)
        if self.default is not None and self.default not in ("mask", "drop"):
            raise ValueError(f"profile {self.name!r}: default must be 'mask' or 'drop'")
        object.__setattr__(self, "actions", MappingProxyType(dict(self.actions)))

    def action_for(self, finding_type: str, proposed: Action) -> Action:
        best: tuple[int, Action] | None = None
        for key, action in self.actions.items():
            prefix = key.rstrip(".")
            if (finding_type == prefix or finding_type.startswith(prefix + ".")) and (
                    best is None or len(prefix) > best[0]):
                best = (len(prefix), action)
        if best is not None:
            return best[1]
        if _family(finding_type) == "secret":
            return self.default_secret
        return self.default if self.default is not None else proposed


DEFAULT_PROFILE = RedactionProfile(
    name="default", actions={"secret.": "drop", "pii.": "mask", "injection.": "quarantine"})
BUILTIN_PROFILES: Mapping[str, RedactionProfile] = MappingProxyType({p.name: p for p in (
    DEFAULT_PROFILE,
    RedactionProfile(name="internal-engineering", actions={
        "secret.": "drop", "pii.": "mask", "pii.email": "allow", "pii.ip_address": "allow",
        "injection.": "quarantine"}),
    RedactionProfile(name="strict", default="drop", actions={
        "secret.": "drop", "pii.": "drop", "injection.": "drop"}),
    RedactionProfile(name="customer-support", actions={
        "secret.": "drop", "pii.": "mask", "pii.email": "mask", "injection.": "drop"}),
)})


def _profile_from_spec(name: str, spec: Any) -> RedactionProfile:
    if not _NAME.fullmatch(name):
        raise ValueError(f"bad profile name {name!r}: lower-case letters, digits, '-', '_', '.'")
    if name in BUILTIN_PROFILES:
        raise ValueError(f"profile {name!r} is built in and cannot be redefined")
    if not isinstance(spec, dict):
        raise ValueError(f"profile {name!r} must be a JSON object")
    unknown = set(spec) - {"actions", "default_secret", "default", "extends"}
    if unknown:
        raise ValueError(f"profile {name!r}: unknown fields {sorted(unknown)}")
    base = spec.get("extends")
    if base is not None and base not in BUILTIN_PROFILES:
        raise ValueError(f"profile {name!r} extends unknown built-in {base!r}")
    actions = spec.get("actions", {})
    if not isinstance(actions, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in actions.items()):
        raise ValueError(f"profile {name!r}: actions must map strings to strings")
    inherited = dict(BUILTIN_PROFILES[base].actions) if base is not None else {}
    return RedactionProfile(
        name=name, actions=cast(dict[str, Action], {**inherited, **actions}),
        default_secret=cast(Action, spec.get("default_secret", "drop")),
        default=cast("Action | None", spec.get("default")))


def profiles_from_json(text: str) -> dict[str, RedactionProfile]:
    """Operator profiles from ``{"<name>": {"actions": {...}, "extends": "default", ...}}``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"redaction profiles are not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError("redaction profiles must be a JSON object of name -> profile")
    return {name: _profile_from_spec(name, spec) for name, spec in data.items()}


def resolve_profile(name: str | None,
                    custom: Mapping[str, RedactionProfile] | None = None) -> RedactionProfile:
    """The profile a turn asked for; ``None`` is ``default``."""
    if name is None:
        return DEFAULT_PROFILE
    profile = BUILTIN_PROFILES.get(name) or (custom or {}).get(name)
    if profile is None:
        known = sorted({*BUILTIN_PROFILES, *(custom or {})})
        raise InvalidRequest(f"unknown redaction profile {name!r}; known: {', '.join(known)}")
    return profile
