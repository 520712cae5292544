"""``ctxgate bundles push``: register a git checkout's instruction files as a bundle revision.

A client of a running server (``CTXGATE_URL``; ``CTXGATE_API_KEY`` an admin key of the
tenant), through ``ctxgate_client``. Contract of ``push(options, env)``, which returns the
exit code:

* The bundle is the runtime's files tracked at ``HEAD`` (``app.integrations.checkout``),
  sent with ``source`` ``{repo, commit}``; the revision id is ``--revision``, else the
  commit's first 12 hex digits.
* Selected files changed in the index or work tree: refused (exit 2) unless
  ``allow_dirty``, which pushes the committed content and says which changes stay out.
* Unchanged content — a revision of the bundle for the same runtime with the same bundle
  hash (``app.core.registry.bundle_sha256``, as the server computes it) — registers
  nothing and says which revision holds it. Otherwise the revision is registered.
  Either way the lint findings are printed.
* ``promote``: that revision becomes the stable channel (new sessions get it); with a
  canary share or agents, the canary instead. Already so: said, nothing sent.
* Exit codes: 0 done (also a no-op); 2 bad input, nothing sent (not a work tree, no commit,
  no instruction file, dirty files, no key); 1 the server refused or could not be reached.
  Results go to stdout, warnings and errors to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, cast

from ctxgate_client import CtxgateClient
from ctxgate_client.errors import (
    CtxgateConnectionError,
    CtxgateError,
    ForbiddenError,
    NotFoundError,
    UnauthorizedError,
)
from ctxgate_client.models import Bundle, BundleRevision, RuntimeName

from app.core.registry import bundle_sha256
from app.integrations.checkout import Checkout, NotACheckout, read_checkout
from app.integrations.config import DEFAULT_URL

OK, FAILED, BAD_INPUT = 0, 1, 2
SHORT_COMMIT = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class PushOptions:
    path: Path
    bundle_id: str
    runtime: str
    revision: str | None = None
    promote: bool = False
    canary_share: float | None = None
    canary_agents: Sequence[str] = ()
    allow_dirty: bool = False


def _say(out: TextIO, line: str = "") -> None:
    print(line, file=out)


def _lint(out: TextIO, findings: Sequence[Mapping[str, Any]]) -> None:
    if not findings:
        _say(out, "lint: no findings")
        return
    _say(out, f"lint: {len(findings)} finding(s)")
    for f in findings:
        other = f" (and {f['other_path']})" if f.get("other_path") else ""
        _say(out, f"  {f.get('type', '?')}  {f.get('path', '')}{other}  {f.get('detail', '')}")


def _existing(client: CtxgateClient, bundle_id: str) -> Bundle | None:
    try:
        return client.get_bundle(bundle_id)
    except NotFoundError:
        return None


def _same(bundle: Bundle | None, runtime: str, sha: str) -> BundleRevision | None:
    """The newest usable revision already holding exactly this content."""
    for rev in reversed(bundle.revisions if bundle else []):
        if rev.sha256 == sha and rev.runtime == runtime and not rev.revoked:
            return rev
    return None


def _promote(client: CtxgateClient, opts: PushOptions, bundle: Bundle | None, revision: str,
             out: TextIO) -> None:
    canary = opts.canary_share is not None or bool(opts.canary_agents)
    channel = bundle.channel if bundle else None
    if channel is not None:
        if not canary and channel.stable == revision and channel.canary is None:
            _say(out, f"already stable: {opts.bundle_id}@{revision}")
            return
        if canary and channel.canary == revision and \
                channel.canary_share == (opts.canary_share or 0.0) and \
                sorted(channel.canary_agents) == sorted(opts.canary_agents):
            _say(out, f"already the canary: {opts.bundle_id}@{revision}")
            return
    new = client.promote_bundle(opts.bundle_id, revision=revision,
                                share=opts.canary_share if canary else None,
                                agents=list(opts.canary_agents) or None)
    if canary:
        _say(out, f"canary: {opts.bundle_id}@{revision} for share {new.canary_share:g}"
             + (f" and agents {', '.join(new.canary_agents)}" if new.canary_agents else "")
             + f" (stable stays {new.stable})")
    else:
        _say(out, f"promoted: {opts.bundle_id}@{revision} is stable; new sessions get it")


def _register(client: CtxgateClient, opts: PushOptions, co: Checkout, out: TextIO) -> None:
    bundle = _existing(client, opts.bundle_id)
    same = _same(bundle, opts.runtime, bundle_sha256(co.files))
    if same is not None:
        _say(out, f"unchanged: {opts.bundle_id}@{same.revision} already holds these "
             f"{len(co.files) - 1} file(s) (commit {same.source.get('commit', '?')}); "
             "nothing registered")
        rev = same
    else:
        rev = client.register_bundle_revision(
            bundle_id=opts.bundle_id, revision=opts.revision or co.commit[:SHORT_COMMIT],
            runtime=cast(RuntimeName, opts.runtime),  # the CLI's choices are RUNTIMES
            files=[{"path": p, "content": c} for p, c in sorted(co.files.items())],
            source={"repo": co.repo, "commit": co.commit})
        _say(out, f"registered: {opts.bundle_id}@{rev.revision} ({len(co.files) - 1} file(s) "
             f"from {co.repo} at {co.commit[:SHORT_COMMIT]}, sha256 {rev.sha256[:12]})")
    _lint(out, rev.lint)
    if opts.promote or opts.canary_share is not None or opts.canary_agents:
        _promote(client, opts, bundle, rev.revision, out)


def push(opts: PushOptions, env: Mapping[str, str], *, out: TextIO = sys.stdout,
         err: TextIO = sys.stderr) -> int:
    try:
        co = read_checkout(opts.path, opts.runtime)
    except NotACheckout as exc:
        _say(err, f"ctxgate bundles push: {exc}")
        return BAD_INPUT
    for path, why in co.skipped:
        _say(err, f"warning: {path} not pushed: {why}")
    if not co.files:
        _say(err, f"ctxgate bundles push: no {opts.runtime} instruction file is tracked at "
             f"HEAD in {co.root}")
        return BAD_INPUT
    if co.dirty:
        listed = ", ".join(co.dirty)
        if not opts.allow_dirty:
            _say(err, f"ctxgate bundles push: uncommitted changes to {listed}; commit them, "
                 "or pass --allow-dirty to push what HEAD holds")
            return BAD_INPUT
        _say(err, f"warning: pushing HEAD's content; uncommitted changes to {listed} stay out")
    key = env.get("CTXGATE_API_KEY", "").strip()
    if not key:
        _say(err, "ctxgate bundles push: CTXGATE_API_KEY is not set: it takes an admin key of "
             "the tenant (ctxgate keys create --tenant T --role admin --quiet)")
        return BAD_INPUT
    url = env.get("CTXGATE_URL", "").strip() or DEFAULT_URL
    try:
        with CtxgateClient(url, key) as client:
            _register(client, opts, co, out)
    except CtxgateConnectionError as exc:
        _say(err, f"ctxgate bundles push: cannot reach the server at {url}: {exc.detail}")
        return FAILED
    except (UnauthorizedError, ForbiddenError) as exc:
        _say(err, f"ctxgate bundles push: {exc} (CTXGATE_API_KEY must be an admin key of "
             "the tenant)")
        return FAILED
    except CtxgateError as exc:
        _say(err, f"ctxgate bundles push: the server refused: {exc}")
        return FAILED
    return OK
