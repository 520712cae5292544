"""Hermes conformance: one context type per session, first non-empty wins, 70/20 cap."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from app.core.bundles import ResolveOptions, resolve
from app.core.bundles.hermes import truncation_marker

GIT = {".git/HEAD": "ref: refs/heads/main\n"}
ALL_LEVELS = {**GIT, ".hermes.md": "hermes", "AGENTS.md": "agents", "CLAUDE.md": "claude",
              ".cursorrules": "cursor"}
LONG = "".join(f"{i:03d}|" for i in range(38))[:150]  # 150 distinct-looking chars
SIXTY_A = "a" * 59 + "A"
SIXTY_B = "B" + "b" * 59


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    files: dict[str, str]
    text: str
    order: tuple[tuple[str, bool], ...]
    cwd: str = ""
    options: ResolveOptions = field(default_factory=ResolveOptions)
    skipped: tuple[tuple[str, str], ...] | None = None


CASES = (
    Case(id="level 1 .hermes.md beats every other type", files=ALL_LEVELS, text="hermes",
         order=((".hermes.md", False),),
         skipped=(("AGENTS.md", "lower precedence"), ("CLAUDE.md", "lower precedence"),
                  (".cursorrules", "lower precedence"))),
    Case(id="level 1 nearest HERMES.md walking up to the git root", cwd="a/b",
         files={**GIT, "HERMES.md": "root", "a/HERMES.md": " \n", "a/b/AGENTS.md": "ag"},
         text="root", order=(("HERMES.md", False),)),
    Case(id="level 1 .hermes.md before HERMES.md; empty one falls through",
         files={**GIT, ".hermes.md": "  ", "HERMES.md": "H"}, text="H",
         order=(("HERMES.md", False),), skipped=((".hermes.md", "empty"),)),
    Case(id="level 1 walk stops at the git root", cwd="a/b",
         files={**GIT, "HERMES.md": "outside", "a/.git": "gitdir: x", "a/AGENTS.md": "A"},
         text="A", order=(("a/AGENTS.md", False),)),
    Case(id="level 1 without git root searches only cwd", cwd="a",
         files={"HERMES.md": "parent", "a/CLAUDE.md": "C"}, text="C",
         order=(("a/CLAUDE.md", False),)),
    Case(id="level 2 wins when level 1 is empty", cwd="a",
         files={**GIT, ".hermes.md": "\n\n", "AGENTS.md": "R\n", "a/AGENTS.md": "A",
                "a/CLAUDE.md": "C"},
         text="R\n\nA", order=(("AGENTS.md", False), ("a/AGENTS.md", False))),
    Case(id="level 2 per-directory precedence override > AGENTS.md > agents.md", cwd="a/b",
         files={**GIT, "AGENTS.override.md": "O", "AGENTS.md": "no", "a/AGENTS.md": " ",
                "a/agents.md": "low", "a/b/agents.md": "b"},
         text="O\n\nlow\n\nb",
         order=(("AGENTS.override.md", False), ("a/agents.md", False),
                ("a/b/agents.md", False))),
    Case(id="level 2 identical AGENTS content once", cwd="a",
         files={**GIT, "AGENTS.md": "same", "a/AGENTS.md": "same\n", "a/b/AGENTS.md": "x"},
         text="same", order=(("AGENTS.md", False),),
         skipped=(("a/AGENTS.md", "duplicate content"),)),
    Case(id="level 2 without git root is cwd only", cwd="a",
         files={"AGENTS.md": "root", "a/AGENTS.md": "A"}, text="A",
         order=(("a/AGENTS.md", False),)),
    Case(id="level 3 CLAUDE.md in cwd only", cwd="a",
         files={**GIT, "CLAUDE.md": "parent", "a/claude.md": "lower", ".cursorrules": "c"},
         text="lower", order=(("a/claude.md", False),)),
    Case(id="level 3 CLAUDE.md before claude.md", files={"CLAUDE.md": "U", "claude.md": "l"},
         text="U", order=(("CLAUDE.md", False),)),
    Case(id="level 4 .cursorrules plus .cursor/rules/*.mdc in cwd", files={
        ".cursorrules": "cr", ".cursor/rules/b.mdc": "b", ".cursor/rules/a.mdc": "a",
        ".cursor/rules/sub/c.mdc": "nested", ".cursor/rules/x.md": "not mdc",
        ".cursor/rules/e.mdc": "  "},
         text="cr\n\na\n\nb",
         order=((".cursorrules", False), (".cursor/rules/a.mdc", False),
                (".cursor/rules/b.mdc", False))),
    Case(id="nothing loads", files={**GIT, "README.md": "r"}, text="", order=()),
    Case(id="exactly max_chars is not truncated", files={"AGENTS.md": "x" * 100},
         options=ResolveOptions(max_chars=100), text="x" * 100, order=(("AGENTS.md", False),)),
    Case(id="70/20 truncation of one file", files={"AGENTS.md": LONG},
         options=ResolveOptions(max_chars=100),
         text=LONG[:70] + truncation_marker("AGENTS.md", 70, 20, 150) + LONG[-20:],
         order=(("AGENTS.md", True),)),
    Case(id="70/20 truncation over the joined chain", cwd="a",
         files={**GIT, "AGENTS.md": SIXTY_A, "a/AGENTS.md": SIXTY_B},
         options=ResolveOptions(max_chars=100),
         text=SIXTY_A + "\n\n" + SIXTY_B[:8] + truncation_marker("AGENTS.md", 70, 20, 122)
         + SIXTY_B[-20:],
         order=(("AGENTS.md", False), ("a/AGENTS.md", True))),
    Case(id="odd cap floors both parts", files={"AGENTS.md": LONG},
         options=ResolveOptions(max_chars=9),
         text=LONG[:6] + truncation_marker("AGENTS.md", 6, 1, 150) + LONG[-1:],
         order=(("AGENTS.md", True),)),
    Case(id="tiny cap keeps no tail", files={"AGENTS.md": LONG},
         options=ResolveOptions(max_chars=4),
         text=LONG[:2] + truncation_marker("AGENTS.md", 2, 0, 150),
         order=(("AGENTS.md", True),)),
)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hermes_conformance(case: Case) -> None:
    res = resolve("hermes", case.files, cwd=case.cwd, options=case.options)
    assert res.text == case.text
    assert tuple((f.path, f.truncated) for f in res.resolved_order) == case.order
    if case.skipped is not None:
        assert tuple((s.path, s.reason) for s in res.skipped) == case.skipped


def test_truncated_bytes_used_counts_kept_characters() -> None:
    res = resolve("hermes", {**GIT, "AGENTS.md": SIXTY_A, "a/AGENTS.md": SIXTY_B}, cwd="a",
                  options=ResolveOptions(max_chars=100))
    assert [f.bytes_used for f in res.resolved_order] == [60, 28]
    assert len(truncation_marker("AGENTS.md", 70, 20, 122)) > 0
