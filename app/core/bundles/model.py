"""Values of instruction-bundle resolution: what a runtime would load, and why.

A *bundle* is an immutable set of files (repo-relative POSIX path → text). Global areas
that live outside the repository are spelled with a path prefix: ``~/.codex/`` (Codex
home), ``~/.claude/`` and ``~/`` (Claude Code user home), ``managed/`` (Claude Code's
``/etc/claude-code``). A resolver turns a bundle, a ``cwd`` and a session type into a
``Resolution``: the exact text the runtime would inject, the files in the order they were
read (``resolved_order``) and every file that was considered but not used (``skipped``).

``ResolvedFile.reason`` is one of ``loaded``, ``truncated``, ``missing``. ``Skipped.reason``
is a stable phrase: ``empty``, ``shadowed``, ``budget exhausted``, ``budget disabled``,
``paths not matched``, ``session filter``, ``duplicate content``, ``lower precedence``,
``unresolved import``, ``import cycle``, ``max import depth``, ``optional, absent``
(OpenClaw's MEMORY.md), ``blocked`` (Hermes replaced the file with its injection
placeholder; the file also has a ``loaded`` entry with ``bytes_used`` 0).
"""

from __future__ import annotations

from dataclasses import dataclass

RUNTIMES: tuple[str, ...] = ("codex", "claude-code", "hermes", "openclaw")
SESSION_TYPES: tuple[str, ...] = ("main", "subagent", "group", "cron")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedFile:
    """One file that contributed to the text (or, for OpenClaw, a ``[MISSING]`` line).

    ``bytes_in`` is the UTF-8 size of the file in the bundle; ``bytes_used`` the UTF-8 size
    of the part of it that reached the text (after trimming, stripping and truncation, not
    counting markers or expanded imports, which have their own entries). ``sha256`` is the
    digest of the full bundle content ("" for a missing file).
    """

    path: str
    layer: str  # global | project | managed | user | local | rule | import | workspace
    bytes_in: int
    bytes_used: int
    truncated: bool
    reason: str
    sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Skipped:
    """A file considered and not used. ``source`` names the importing file for imports."""

    path: str
    reason: str
    source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    text: str
    resolved_order: tuple[ResolvedFile, ...]
    skipped: tuple[Skipped, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolveOptions:
    """Runtime knobs; each resolver reads only its own.

    codex: ``fallback_names``, ``project_doc_max_bytes``, ``root_markers``.
    claude-code: ``files_in_play`` (repo-relative paths the runtime has read or is
    editing, which path-scoped rules match), ``max_import_depth``.
    hermes: ``root_markers``, ``max_chars``.
    openclaw: ``per_file_max_chars``, ``total_max_chars``.
    """

    fallback_names: tuple[str, ...] = ()
    project_doc_max_bytes: int = 32768
    root_markers: tuple[str, ...] = (".git",)
    files_in_play: tuple[str, ...] = ()
    max_import_depth: int = 5
    max_chars: int = 20000
    per_file_max_chars: int = 20000
    total_max_chars: int = 150000

    def __post_init__(self) -> None:
        if self.project_doc_max_bytes < 0:
            raise ValueError("project_doc_max_bytes must be >= 0")
        if self.max_import_depth < 0:
            raise ValueError("max_import_depth must be >= 0")
        for name in ("max_chars", "per_file_max_chars", "total_max_chars"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
