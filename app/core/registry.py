"""Instruction-bundle registry values and the pure rules of release and pinning.

Contract:
- a revision's identity is ``sha256`` over its files (sorted paths, each path and content
  hashed), so the same files always give the same hash and any change gives another;
- ``pick_revision(channel, session_id, agent_id)`` says which revision a *new* session gets:
  the canary for named agents or for a stable hash-share of sessions, else stable;
- a session, once bound, keeps its revision; a revoked one is either replaced by the
  channel's current good revision (``fallback``) or refused (``block``), per policy;
- ``shadow_revision(channel, session_id, agent_id)`` says which revision a turn resolves
  beside the one it is served (never served): the shadow, for named agents or for a stable
  hash-share of sessions drawn apart from the canary's, so the two cohorts are independent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleFile:
    path: str
    content: str
    sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleRevision:
    bundle_id: str
    revision: str
    runtime: str
    sha256: str
    files: tuple[BundleFile, ...]
    source: Mapping[str, Any] = field(default_factory=dict)
    declared_scope: tuple[str, ...] = ()
    approval: Mapping[str, Any] = field(default_factory=dict)
    compatibility: Mapping[str, Any] = field(default_factory=dict)
    lint: tuple[Mapping[str, Any], ...] = ()
    revoked: bool = False
    created_at: str | None = None
    registered_by: str | None = None  # the key that registered it (None: before 0026)

    def file_map(self) -> dict[str, str]:
        return {f.path: f.content for f in self.files}


@dataclass(frozen=True, slots=True, kw_only=True)
class Channel:
    stable: str | None
    canary: str | None = None
    canary_share: float = 0.0
    canary_agents: tuple[str, ...] = ()
    shadow: str | None = None
    shadow_share: float = 0.0
    shadow_agents: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Binding:
    bundle_id: str
    revision: str
    sha256: str


def file_sha256(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def bundle_sha256(files: Mapping[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(file_sha256(path).encode())
        h.update(file_sha256(files[path]).encode())
    return h.hexdigest()


def _in_cohort(share: float, agents: tuple[str, ...], key: str, agent_id: str | None
               ) -> bool:
    if agent_id is not None and agent_id in agents:
        return True
    # A stable hash: the same session always lands in the same cohort.
    bucket = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return bucket < share


def in_canary(channel: Channel, session_id: str, agent_id: str | None) -> bool:
    if channel.canary is None:
        return False
    return _in_cohort(channel.canary_share, channel.canary_agents, session_id, agent_id)


def shadow_revision(channel: Channel, session_id: str, agent_id: str | None) -> str | None:
    if channel.shadow is None:
        return None
    # Salted: a 10 % shadow and a 10 % canary would otherwise be the very same sessions.
    key = f"shadow:{session_id}"
    return (channel.shadow if _in_cohort(channel.shadow_share, channel.shadow_agents, key,
                                         agent_id) else None)


def pick_revision(channel: Channel, session_id: str, agent_id: str | None) -> str | None:
    if in_canary(channel, session_id, agent_id):
        return channel.canary
    return channel.stable
