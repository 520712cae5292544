"""Instruction bundles: what Codex, Claude Code, Hermes and OpenClaw would load.

``resolve`` turns a bundle (repo-relative path → text), a ``cwd`` and a session type into
a ``Resolution``; ``lint`` reads a resolution for problems a Markdown rule file cannot
solve by itself. Each runtime's contract is stated in its module's docstring.
"""

from app.core.bundles.lint import LintFinding, lint
from app.core.bundles.model import (
    RUNTIMES,
    SESSION_TYPES,
    Resolution,
    ResolvedFile,
    ResolveOptions,
    Skipped,
)
from app.core.bundles.resolver import resolve

__all__ = ["RUNTIMES", "SESSION_TYPES", "LintFinding", "Resolution", "ResolveOptions",
           "ResolvedFile", "Skipped", "lint", "resolve"]
