"""Instruction bundles: register (with lint), revoke, diff, and admit a turn.

Lint marks blocking findings (``app.core.bundles.hazards.BLOCKING``: injection, remote
scripts, approval waivers, secrets; each record says ``blocking: true``); what promotion
requires of a revision is ``app.service.bundle_release``'s. A revision records the key that
registered it (the four-eyes rule of its review).

A session is pinned at its first turn to the revision its channel gives it; later promotions
affect new sessions only. A pinned revision that has since been revoked is, per policy,
replaced by the channel's current good revision (``fallback``) or refused with 409
(``block``) until the session is re-authorized. Resolutions are pure functions of
(bundle hash, runtime, cwd, session type, files in play), so they are cached in-process.

A turn may pin a revision itself (``workspace.revision``, e.g. an evaluation comparing two):
only one its channel serves (stable or canary) or shadows for the turn's cohort, else 403 —
a runtime key never reads an unpromoted revision's text otherwise. A pinned turn binds no
session and resolves no shadow.

Shadow: on a turn of the channel's shadow cohort, the shadow revision is resolved beside the
served one (``Admitted.shadow``) for the manifest, never served. The channel comes with the
session's pin in one read and revisions and resolutions are cached, so a shadow costs no
round trip once its revision was read; a shadow that fails to resolve is logged and left out.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from app.core.bundles import Resolution, ResolveOptions, lint, resolve
from app.core.bundles.hazards import BLOCKING, hazards
from app.core.errors import Conflict, DomainError, ForbiddenScope, InvalidRequest, NotFound
from app.core.guards.safety import Detector
from app.core.model import Workspace
from app.core.registry import (
    Binding,
    BundleFile,
    BundleRevision,
    Channel,
    bundle_sha256,
    file_sha256,
    pick_revision,
    shadow_revision,
)
from app.ports import BundleStore

log = logging.getLogger(__name__)
RESOLUTION_CACHE = 512
MAX_LINT_DIRS = 64


class BundleRevoked(Conflict):
    type = "bundle-revoked"


@dataclass(frozen=True, slots=True, kw_only=True)
class Shadowed:
    """A shadow revision resolved beside the served one: recorded, never served."""

    revision: str
    sha256: str
    resolution: Resolution


@dataclass(frozen=True, slots=True, kw_only=True)
class Admitted:
    binding: Binding
    runtime: str
    origin: str
    resolution: Resolution
    rebound_from: str | None = None
    pinned: bool = False  # the request named the revision (workspace.revision)
    shadow: Shadowed | None = None


def _directories(files: Mapping[str, str]) -> list[str]:
    """Every directory holding a file, root first, bounded: the cwds lint resolves for."""
    dirs = {""} | {p.rsplit("/", 1)[0] for p in files if "/" in p}
    # Global (~/...), managed and VCS areas are not places an agent can work in.
    skip = (".git", "~", "managed")
    return sorted(d for d in dirs if not d.startswith(skip))[:MAX_LINT_DIRS]


class BundleService:
    def __init__(self, store: BundleStore, *, detectors: Sequence[Detector],
                 count_tokens: Callable[[str], int], revoked_policy: str,
                 injection: Sequence[Detector] = ()) -> None:
        self._store = store
        self._detectors = detectors
        self._injection = injection
        self._count = count_tokens
        self._policy = revoked_policy
        self._revisions: dict[tuple[str, str, str], BundleRevision] = {}
        self._files: dict[str, dict[str, str]] = {}  # by bundle sha256
        self._resolve = lru_cache(maxsize=RESOLUTION_CACHE)(self._resolve_uncached)

    async def register(self, *, tenant_id: str, revision: BundleRevision, actor: str
                       ) -> BundleRevision:
        files = revision.file_map()
        full = replace(
            revision, sha256=bundle_sha256(files), registered_by=actor,
            files=tuple(BundleFile(path=p, content=c, sha256=file_sha256(c))
                        for p, c in sorted(files.items())),
            lint=self._lint(revision.runtime, files))
        return await self._store.register(tenant_id=tenant_id, revision=full)

    def _lint(self, runtime: str, files: Mapping[str, str]) -> tuple[dict[str, Any], ...]:
        """Lint what an agent would load in every directory of the bundle, plus secrets."""
        found: list[dict[str, Any]] = []
        for cwd in _directories(files):
            try:
                resolution = resolve(runtime, files, cwd=cwd)
            except ValueError as exc:
                raise InvalidRequest(str(exc)) from exc
            for f in lint(runtime, files, resolution):
                record = {"type": f.type, "path": f.path, "detail": f.message,
                          **({"other_path": f.other_path} if f.other_path else {})}
                if record not in found:
                    found.append(record)
        for path, content in sorted(files.items()):
            for det in self._detectors:
                types = sorted({f.type for f in det(content) if f.type.startswith("secret.")})
                found += [{"type": "lint.secret", "path": path, "detail": t} for t in types]
        found += [{"type": f.type, "path": f.path, "detail": f.message, "excerpt": f.excerpt}
                  for f in hazards(files, injection=self._injection)]
        return tuple({**r, "blocking": True} if r["type"] in BLOCKING else r for r in found)

    async def revision(self, *, tenant_id: str, bundle_id: str, revision: str
                       ) -> BundleRevision:
        key = (tenant_id, bundle_id, revision)
        cached = self._revisions.get(key)
        if cached is not None:
            return cached
        found = await self._store.get(tenant_id=tenant_id, bundle_id=bundle_id,
                                      revision=revision)
        if found is None:
            raise NotFound(f"no bundle revision {bundle_id!r}@{revision!r}")
        self._revisions[key] = found  # immutable content; revocation is checked separately
        self._files[found.sha256] = found.file_map()
        return found

    async def overview(self, *, tenant_id: str, bundle_id: str
                       ) -> tuple[list[BundleRevision], Channel | None]:
        revisions = await self._store.revisions(tenant_id=tenant_id, bundle_id=bundle_id)
        if not revisions:
            raise NotFound(f"no bundle {bundle_id!r}")
        return revisions, await self._store.channel(tenant_id=tenant_id, bundle_id=bundle_id)

    async def revoke(self, *, tenant_id: str, bundle_id: str, revision: str,
                     reason: str) -> None:
        if not await self._store.revoke(tenant_id=tenant_id, bundle_id=bundle_id,
                                        revision=revision, reason=reason):
            raise NotFound(f"no bundle revision {bundle_id!r}@{revision!r}")

    async def diff(self, *, tenant_id: str, bundle_id: str, old: str, new: str,
                   workspace_cwd: str, session_type: str) -> dict[str, Any]:
        a = await self.revision(tenant_id=tenant_id, bundle_id=bundle_id, revision=old)
        b = await self.revision(tenant_id=tenant_id, bundle_id=bundle_id, revision=new)
        ra = self._resolve(a.sha256, a.runtime, workspace_cwd, session_type)
        rb = self._resolve(b.sha256, b.runtime, workspace_cwd, session_type)
        lines = difflib.unified_diff(ra.text.splitlines(), rb.text.splitlines(),
                                     f"{bundle_id}@{old}", f"{bundle_id}@{new}", lineterm="")
        tokens_a, tokens_b = self._count(ra.text), self._count(rb.text)
        return {"from": old, "to": new, "cwd": workspace_cwd, "diff": "\n".join(lines),
                "tokens": {"from": tokens_a, "to": tokens_b, "delta": tokens_b - tokens_a},
                "resolved_order": {"from": [f.path for f in ra.resolved_order],
                                   "to": [f.path for f in rb.resolved_order]}}

    def _resolve_uncached(self, sha: str, runtime: str, cwd: str, session_type: str,
                          files: tuple[str, ...] = ()) -> Resolution:
        try:
            return resolve(runtime, self._files[sha], cwd=cwd, session_type=session_type,
                           options=ResolveOptions(files_in_play=files))
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from exc

    async def admit(self, *, tenant_id: str, session_id: str | None, agent_id: str | None,
                    workspace: Workspace) -> Admitted:
        """The revision this turn is served, resolved for its cwd, and the shadow beside it
        when the turn is in the shadow cohort."""
        key = session_id or ""
        pin, revoked, channel = await self._store.session_state(
            tenant_id=tenant_id, session_id=key, bundle_id=workspace.bundle_id)
        shadow = shadow_revision(channel, key, agent_id) if channel else None
        rebound_from = None
        if workspace.revision is not None:
            binding = await self._pinned(tenant_id, workspace.bundle_id, workspace.revision,
                                         channel, shadow)
            shadow = None
        else:
            binding, rebound_from = await self._binding(
                tenant_id, session_id, agent_id, workspace.bundle_id, pin, revoked, channel)
        rev, resolution = await self._resolved(tenant_id, workspace, binding.revision)
        return Admitted(binding=binding, runtime=rev.runtime, origin=_origin(rev, workspace),
                        resolution=resolution, rebound_from=rebound_from,
                        pinned=workspace.revision is not None,
                        shadow=await self._shadowed(tenant_id, workspace, shadow)
                        if shadow not in (None, binding.revision) else None)

    async def preview(self, *, tenant_id: str, workspace: Workspace, revision: str
                      ) -> Admitted:
        """Revision ``revision`` resolved for ``workspace`` as if served, for a replay that
        serves nothing: any registered revision (promoted or not), no session bound, no
        shadow. A missing revision is ``NotFound``, as in ``revision``."""
        rev, resolution = await self._resolved(tenant_id, workspace, revision)
        return Admitted(binding=Binding(bundle_id=workspace.bundle_id, revision=revision,
                                        sha256=rev.sha256),
                        runtime=rev.runtime, origin=_origin(rev, workspace),
                        resolution=resolution,
                        rebound_from=None, pinned=True, shadow=None)

    async def _resolved(self, tenant_id: str, workspace: Workspace, revision: str
                        ) -> tuple[BundleRevision, Resolution]:
        rev = await self.revision(tenant_id=tenant_id, bundle_id=workspace.bundle_id,
                                  revision=revision)
        return rev, self._resolve(rev.sha256, rev.runtime, workspace.cwd,
                                  workspace.session_type, workspace.files)

    async def _shadowed(self, tenant_id: str, workspace: Workspace, revision: str | None
                        ) -> Shadowed | None:
        if revision is None:
            return None
        try:
            rev, resolution = await self._resolved(tenant_id, workspace, revision)
        except DomainError:  # a shadow never fails the turn it is not served to
            log.warning("bundle shadow %s@%s did not resolve", workspace.bundle_id, revision,
                        exc_info=True)
            return None
        return Shadowed(revision=revision, sha256=rev.sha256, resolution=resolution)

    async def _pinned(self, tenant_id: str, bundle_id: str, wanted: str,
                      channel: Channel | None, shadow: str | None) -> Binding:
        if channel is None:
            raise NotFound(f"bundle {bundle_id!r} has no promoted revision")
        if wanted not in (channel.stable, channel.canary, shadow):
            raise ForbiddenScope(f"revision {wanted!r} is neither served by the channel nor in "
                                 "shadow for this turn's cohort; a turn may pin only those")
        rev = await self.revision(tenant_id=tenant_id, bundle_id=bundle_id, revision=wanted)
        return Binding(bundle_id=bundle_id, revision=wanted, sha256=rev.sha256)

    async def _binding(self, tenant_id: str, session_id: str | None, agent_id: str | None,
                       bundle_id: str, pin: Binding | None, revoked: bool,
                       channel: Channel | None) -> tuple[Binding, str | None]:
        key = session_id or ""
        if pin is not None and not revoked:
            return pin, None
        if pin is not None and self._policy == "block":
            raise BundleRevoked(f"the session's bundle revision {pin.revision!r} was revoked; "
                                "re-authorize the session")
        chosen = pick_revision(channel, key, agent_id) if channel else None
        if chosen is None:
            raise NotFound(f"bundle {bundle_id!r} has no promoted revision")
        rev = await self.revision(tenant_id=tenant_id, bundle_id=bundle_id, revision=chosen)
        binding = Binding(bundle_id=bundle_id, revision=chosen, sha256=rev.sha256)
        if session_id is None:
            return binding, None
        bound = await self._store.bind(tenant_id=tenant_id, session_id=session_id,
                                       binding=binding, replace=pin is not None)
        return bound, pin.revision if pin is not None else None


def _origin(rev: BundleRevision, workspace: Workspace) -> str:
    """The bundle's segment origin: its repository at the revision's commit."""
    return f"repo://{rev.source.get('repo', workspace.bundle_id)}@" \
           f"{rev.source.get('commit', rev.revision)}"
