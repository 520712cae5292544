"""Which checkout files a bundle push selects (``app.core.bundles.checkout``), held against
the resolvers themselves: over a tree of every instruction name in several directories, a
file a runtime's resolver reads from any ``cwd`` and session type is selected, and a
selected file is one the resolver reads (or records as considered) from some ``cwd``."""

from __future__ import annotations

import pytest

from app.core.bundles import RUNTIMES, SESSION_TYPES, resolve
from app.core.bundles.checkout import ROOT_MARKER, imports, loads, reserved

NAMES = ("AGENTS.md", "AGENTS.override.md", "agents.md", "CLAUDE.md", "claude.md",
         "CLAUDE.local.md", ".claude/CLAUDE.md", ".hermes.md", "HERMES.md", ".cursorrules",
         ".cursor/rules/a.mdc", ".cursor/rules/b.txt", "SOUL.md", "TOOLS.md", "IDENTITY.md",
         "USER.md", "HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md", "README.md", "main.py")
DIRS = ("", "svc", "svc/refund")
TREE = {f"{d}/{n}" if d else n: f"text of {d or 'root'}/{n}" for d in DIRS for n in NAMES} | {
    ".claude/rules/a.md": "rule a", ".claude/rules/deep/b.md": "rule b",
    ".claude/rules/c.txt": "not a rule", "svc/.claude/rules/x.md": "not at the root",
    "docs/guide.md": "a guide", "docs/unrelated.md": "unrelated", ROOT_MARKER: ""}


CWDS = sorted({p.rsplit("/", 1)[0] if "/" in p else "" for p in TREE})  # every directory


def _read_by_resolver(runtime: str, files: dict[str, str]) -> set[str]:
    """Every file the resolver reads or records as considered, from any cwd and session."""
    seen: set[str] = set()
    for cwd in CWDS:
        for session_type in SESSION_TYPES:
            res = resolve(runtime, files, cwd=cwd, session_type=session_type)
            seen |= {f.path for f in res.resolved_order if f.reason != "missing"}
            seen |= {s.path for s in res.skipped if s.reason != "optional, absent"}
    return seen - {ROOT_MARKER}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_resolver_reads_nothing_unselected(runtime: str) -> None:
    assert _read_by_resolver(runtime, TREE) <= {p for p in TREE if loads(runtime, p)}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_file_alone_is_read_exactly_when_selected(runtime: str) -> None:
    """Alone in a checkout, so that no other file shadows or outranks it."""
    for path, text in TREE.items():
        if path != ROOT_MARKER:
            read = path in _read_by_resolver(runtime, {path: text, ROOT_MARKER: ""})
            assert read == loads(runtime, path), path


@pytest.mark.parametrize(("runtime", "expected"), [
    ("codex", {"AGENTS.md", "AGENTS.override.md"}),
    ("claude-code", {"CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md"}),
    ("hermes", {"AGENTS.md", "AGENTS.override.md", "agents.md", "CLAUDE.md", "claude.md",
                ".claude/CLAUDE.md",  # the CLAUDE.md of an agent working in .claude/
                ".hermes.md", "HERMES.md", ".cursorrules", ".cursor/rules/a.mdc"}),
    ("openclaw", {"AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md",
                  "HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md"}),
])
def test_names_at_the_root(runtime: str, expected: set[str]) -> None:
    assert {n for n in NAMES if loads(runtime, n)} == expected


def test_rules_only_at_the_root_and_global_areas_never() -> None:
    assert loads("claude-code", ".claude/rules/deep/b.md")
    assert not loads("claude-code", ".claude/rules/c.txt")
    assert not loads("claude-code", "svc/.claude/rules/x.md")
    assert not loads("openclaw", "svc/SOUL.md")  # its workspace is the root
    for path in ("~/.claude/CLAUDE.md", "~/.codex/AGENTS.md", "managed/CLAUDE.md"):
        assert reserved(path)
        assert not any(loads(r, path) for r in RUNTIMES)
    assert loads("codex", "managed/AGENTS.md")  # only Claude Code's managed file is global
    with pytest.raises(ValueError, match="unknown runtime"):
        loads("claude_code", "CLAUDE.md")


def test_claude_code_imports_as_its_resolver_resolves_them() -> None:
    text = ("See @docs/guide.md and @../up.md or @~/.claude/mine.md, `@docs/code.md`\n"
            "```\n@docs/fenced.md\n```\n@./sibling.md twice: @docs/guide.md\n")
    assert imports("claude-code", "svc/CLAUDE.md", text) == [
        "svc/docs/guide.md", "up.md", "svc/sibling.md"]
    assert imports("codex", "AGENTS.md", text) == []
