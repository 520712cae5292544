"""``resolve``: one entry point over the four runtime resolvers.

Contract: ``resolve(runtime, files, cwd=..., session_type=..., options=...)`` validates its
input and dispatches. ``ValueError`` (with the offending value in the message) for an
unknown runtime or session type, a ``cwd`` that is absolute, holds NUL, escapes the root
with ``..`` or names a global area (``~``), and for bundle paths of the same kinds. Pure:
the same arguments always give an equal ``Resolution``.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.core.bundles import claude_code, codex, hermes, openclaw
from app.core.bundles.common import Bundle, normalize_cwd
from app.core.bundles.model import RUNTIMES, SESSION_TYPES, Resolution, ResolveOptions


def resolve(runtime: str, files: Mapping[str, str], *, cwd: str, session_type: str = "main",
            options: ResolveOptions | None = None) -> Resolution:
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}")
    if session_type not in SESSION_TYPES:
        raise ValueError(f"unknown session_type {session_type!r}; expected one of "
                         f"{', '.join(SESSION_TYPES)}")
    where = normalize_cwd(cwd)
    bundle = Bundle.of(files)
    opts = options or ResolveOptions()
    if runtime == "codex":
        return codex.resolve(bundle, where, opts)
    if runtime == "claude-code":
        return claude_code.resolve(bundle, where, opts)
    if runtime == "hermes":
        return hermes.resolve(bundle, where, opts)
    return openclaw.resolve(bundle, session_type, opts)
