"""OpenClaw conformance: fixed bootstrap order, [MISSING] lines, session filters, caps."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from app.core.bundles import ResolveOptions, resolve
from app.core.bundles.openclaw import FILES, truncation_marker

ALL = {name: name.split(".")[0].lower() for name in FILES}
ALL_TEXT = "\n\n".join(ALL[n] for n in FILES)
LONG = "".join(f"{i:03d}|" for i in range(38))[:150]
HUNDRED = "s" * 99 + "S"


def mark(name: str, head: int, tail: int, total: int) -> str:
    return "\n" + truncation_marker(name, head, tail, total) + "\n"


def missing(*names: str) -> tuple[tuple[str, bool], ...]:
    return tuple((n, False) for n in names)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    files: dict[str, str]
    text: str
    order: tuple[tuple[str, bool], ...]
    session: str = "main"
    cwd: str = ""
    options: ResolveOptions = field(default_factory=ResolveOptions)
    skipped: tuple[tuple[str, str], ...] | None = None


CASES = (
    Case(id="main: all eight files in fixed order", files=ALL, text=ALL_TEXT,
         order=missing(*FILES)),
    Case(id="cron is like main", files=ALL, session="cron", text=ALL_TEXT,
         order=missing(*FILES)),
    Case(id="cwd is ignored: the workspace is the repo root", files=ALL, cwd="svc/refund",
         text=ALL_TEXT, order=missing(*FILES)),
    Case(id="missing files become [MISSING] lines", files={"AGENTS.md": "A\n\n"},
         text="A\n\n" + "\n\n".join(f"[MISSING] {n}" for n in FILES[1:]),
         order=missing(*FILES)),
    Case(id="subagent gets only AGENTS.md and TOOLS.md", files=ALL, session="subagent",
         text="agents\n\ntools", order=missing("AGENTS.md", "TOOLS.md"),
         skipped=tuple((n, "session filter") for n in FILES
                       if n not in ("AGENTS.md", "TOOLS.md"))),
    Case(id="subagent with TOOLS.md missing", files={"AGENTS.md": "A", "MEMORY.md": "m"},
         session="subagent", text="A\n\n[MISSING] TOOLS.md",
         order=missing("AGENTS.md", "TOOLS.md"), skipped=(("MEMORY.md", "session filter"),)),
    Case(id="group never gets MEMORY.md", files=ALL, session="group",
         text="\n\n".join(ALL[n] for n in FILES[:-1]), order=missing(*FILES[:-1]),
         skipped=(("MEMORY.md", "session filter"),)),
    Case(id="group with MEMORY.md absent has no [MISSING] MEMORY.md", session="group",
         files={n: ALL[n] for n in FILES[:-1]},
         text="\n\n".join(ALL[n] for n in FILES[:-1]), order=missing(*FILES[:-1])),
    Case(id="blank file is skipped, not missing", files={**ALL, "SOUL.md": " \n"},
         text="\n\n".join(ALL[n] for n in FILES if n != "SOUL.md"),
         order=missing(*(n for n in FILES if n != "SOUL.md")),
         skipped=(("SOUL.md", "empty"),)),
    Case(id="per-file cap: 70% head, marker, 20% tail", files={**ALL, "TOOLS.md": LONG},
         options=ResolveOptions(per_file_max_chars=100),
         text="agents\n\nsoul\n\n" + LONG[:70] + mark("TOOLS.md", 70, 20, 150) + LONG[-20:]
         + "\n\n" + "\n\n".join(ALL[n] for n in FILES[3:]),
         order=(("AGENTS.md", False), ("SOUL.md", False), ("TOOLS.md", True),
                *missing(*FILES[3:]))),
    Case(id="exactly the per-file cap is not truncated", files={"AGENTS.md": LONG},
         session="subagent", options=ResolveOptions(per_file_max_chars=150),
         text=LONG + "\n\n[MISSING] TOOLS.md", order=missing("AGENTS.md", "TOOLS.md")),
    Case(id="total cap: under 64 left skips the rest",
         files={"AGENTS.md": LONG, "SOUL.md": HUNDRED},
         options=ResolveOptions(total_max_chars=200), text=LONG, order=missing("AGENTS.md"),
         skipped=tuple((n, "budget exhausted") for n in FILES[1:])),
    Case(id="total cap: a later file is cut to what is left",
         files={"AGENTS.md": LONG, "SOUL.md": HUNDRED},
         options=ResolveOptions(total_max_chars=230),
         text=LONG + "\n\n" + HUNDRED[:56] + mark("SOUL.md", 56, 16, 100)[:24],
         order=(("AGENTS.md", False), ("SOUL.md", True)),
         skipped=tuple((n, "budget exhausted") for n in FILES[2:])),
    Case(id="total cap counts [MISSING] lines", files={},
         options=ResolveOptions(total_max_chars=25),
         text="[MISSING] AGENTS.md\n\n[MISSI", order=missing("AGENTS.md", "SOUL.md"),
         skipped=tuple((n, "budget exhausted") for n in FILES[2:])),
)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_openclaw_conformance(case: Case) -> None:
    res = resolve("openclaw", case.files, cwd=case.cwd, session_type=case.session,
                  options=case.options)
    assert res.text == case.text
    assert tuple((f.path, f.truncated) for f in res.resolved_order) == case.order
    if case.skipped is not None:
        assert tuple((s.path, s.reason) for s in res.skipped) == case.skipped


def test_missing_entries_are_marked() -> None:
    res = resolve("openclaw", {"AGENTS.md": "A"}, cwd="", session_type="subagent")
    tools = res.resolved_order[1]
    assert (tools.path, tools.reason, tools.bytes_in, tools.sha256) == ("TOOLS.md", "missing",
                                                                        0, "")


def test_cut_file_bytes_used_excludes_the_marker() -> None:
    res = resolve("openclaw", {"AGENTS.md": LONG, "SOUL.md": HUNDRED}, cwd="",
                  options=ResolveOptions(total_max_chars=230))
    assert [f.bytes_used for f in res.resolved_order] == [150, 56]
