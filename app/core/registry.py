"""Instruction-bundle registry values and the pure rules of release and pinning.

Contract:
- a revision's identity is ``sha256`` over its files (sorted paths, each path and content
  hashed), so the same files always give the same hash and any change gives another;
- ``pick_revision(channel, session_id, agent_id)`` says which revision a *new* session gets:
  the canary for named agents or for a stable hash-share of sessions, else stable;
- a session, once bound, keeps its revision; a revoked one is either replaced by the
  channel's current good revision (``fallback``) or refused (``block``), per policy.
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

    def file_map(self) -> dict[str, str]:
        return {f.path: f.content for f in self.files}


@dataclass(frozen=True, slots=True, kw_only=True)
class Channel:
    stable: str | None
    canary: str | None = None
    canary_share: float = 0.0
    canary_agents: tuple[str, ...] = ()


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


def in_canary(channel: Channel, session_id: str, agent_id: str | None) -> bool:
    if channel.canary is None:
        return False
    if agent_id is not None and agent_id in channel.canary_agents:
        return True
    # A stable hash of the session id: the same session always lands in the same cohort.
    bucket = int(hashlib.sha256(session_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return bucket < channel.canary_share


def pick_revision(channel: Channel, session_id: str, agent_id: str | None) -> str | None:
    if in_canary(channel, session_id, agent_id):
        return channel.canary
    return channel.stable
