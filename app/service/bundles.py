"""Instruction bundles: register (with lint), promote, revoke, diff, and admit a session.

A revision whose lint holds a blocking finding (``app.core.bundles.hazards.BLOCKING``:
injection, remote scripts, approval waivers, secrets; each record says ``blocking: true``)
is not promoted (``LintBlocked``, 409 ``bundle-lint-blocked``) unless an admin overrides with
a reason; the override is written to the audit log (``bundle.promote_override``: who, which
revision, the reason and the finding types and paths, no rule text).

A session is pinned at its first turn to the revision its channel gives it; later promotions
affect new sessions only. A pinned revision that has since been revoked is, per policy,
replaced by the channel's current good revision (``fallback``) or refused with 409
(``block``) until the session is re-authorized. Resolutions are pure functions of
(bundle hash, runtime, cwd, session type, files in play), so they are cached in-process.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from app.core.bundles import Resolution, ResolveOptions, lint, resolve
from app.core.bundles.hazards import BLOCKING, hazards
from app.core.errors import Conflict, InvalidRequest, NotFound
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
)
from app.ports import AuditLog, AuditRecord, BundleStore

RESOLUTION_CACHE = 512
MAX_LINT_DIRS = 64


class BundleRevoked(Conflict):
    type = "bundle-revoked"


class LintBlocked(Conflict):
    type = "bundle-lint-blocked"


@dataclass(frozen=True, slots=True, kw_only=True)
class Admitted:
    binding: Binding
    runtime: str
    origin: str
    resolution: Resolution
    rebound_from: str | None = None


def _directories(files: Mapping[str, str]) -> list[str]:
    """Every directory holding a file, root first, bounded: the cwds lint resolves for."""
    dirs = {""} | {p.rsplit("/", 1)[0] for p in files if "/" in p}
    # Global (~/...), managed and VCS areas are not places an agent can work in.
    skip = (".git", "~", "managed")
    return sorted(d for d in dirs if not d.startswith(skip))[:MAX_LINT_DIRS]


class BundleService:
    def __init__(self, store: BundleStore, *, detectors: Sequence[Detector],
                 count_tokens: Callable[[str], int], revoked_policy: str,
                 audit: AuditLog, injection: Sequence[Detector] = ()) -> None:
        self._store = store
        self._detectors = detectors
        self._injection = injection
        self._audit = audit
        self._count = count_tokens
        self._policy = revoked_policy
        self._revisions: dict[tuple[str, str, str], BundleRevision] = {}
        self._files: dict[str, dict[str, str]] = {}  # by bundle sha256
        self._resolve = lru_cache(maxsize=RESOLUTION_CACHE)(self._resolve_uncached)

    async def register(self, *, tenant_id: str, revision: BundleRevision) -> BundleRevision:
        files = revision.file_map()
        full = replace(
            revision, sha256=bundle_sha256(files),
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

    async def promote(self, *, tenant_id: str, bundle_id: str, revision: str,
                      share: float | None, agents: Sequence[str], actor: str,
                      override_reason: str | None = None) -> Channel:
        """Roll ``revision`` out (fully, or to a canary cohort). Blocking lint findings refuse
        it unless ``override_reason`` is given (admin routes only), which is audited."""
        rev = await self._store.get(tenant_id=tenant_id, bundle_id=bundle_id,
                                    revision=revision)
        if rev is None:
            raise NotFound(f"no bundle revision {bundle_id!r}@{revision!r}")
        if rev.revoked:
            raise BundleRevoked(f"revision {revision!r} is revoked and cannot be promoted")
        blocking = [f for f in rev.lint if f.get("type") in BLOCKING]
        if blocking and not override_reason:
            kinds = ", ".join(sorted({f"{f['type']} in {f['path']}" for f in blocking}))
            raise LintBlocked(f"revision {revision!r} has blocking lint findings ({kinds}); "
                              "fix them, or promote with an override_reason")
        current = await self._store.channel(tenant_id=tenant_id, bundle_id=bundle_id)
        current = current or Channel(stable=None)
        if share is None and not agents:
            channel = Channel(stable=revision)  # full rollout ends any canary
        else:
            channel = Channel(stable=current.stable or revision, canary=revision,
                              canary_share=share or 0.0, canary_agents=tuple(agents))
        await self._store.set_channel(tenant_id=tenant_id, bundle_id=bundle_id,
                                      channel=channel)
        if blocking:  # after the rollout took effect: the record says what happened
            await self._audit.write(tenant_id=tenant_id, records=[AuditRecord(
                turn_id=None, kind="bundle.promote_override", principal=actor,
                ref=f"bundle://{bundle_id}@{revision}", rule=None,
                detail={"reason": override_reason, "findings": [
                    {"type": f["type"], "path": f["path"]} for f in blocking]})])
        return channel

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
        """The revision this turn's session is pinned to, resolved for its cwd."""
        binding, rebound_from = await self._binding(tenant_id, session_id, agent_id,
                                                    workspace.bundle_id)
        rev = await self.revision(tenant_id=tenant_id, bundle_id=workspace.bundle_id,
                                  revision=binding.revision)
        resolution = self._resolve(rev.sha256, rev.runtime, workspace.cwd,
                                   workspace.session_type, workspace.files)
        origin = f"repo://{rev.source.get('repo', workspace.bundle_id)}@" \
                 f"{rev.source.get('commit', rev.revision)}"
        return Admitted(binding=binding, runtime=rev.runtime, origin=origin,
                        resolution=resolution, rebound_from=rebound_from)

    async def _binding(self, tenant_id: str, session_id: str | None, agent_id: str | None,
                       bundle_id: str) -> tuple[Binding, str | None]:
        key = session_id or ""
        pin, revoked, channel = await self._store.session_state(
            tenant_id=tenant_id, session_id=key, bundle_id=bundle_id)
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
