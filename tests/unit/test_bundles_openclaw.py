"""OpenClaw conformance: fixed bootstrap order, session allowlists, [MISSING] lines, caps,
``## <path>`` sections. Each row cites where the behaviour is written in openclaw/openclaw
(the stored files are read whole, so rows anchor on the named symbol in that file)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from app.core.bundles import ResolveOptions, resolve
from app.core.bundles.openclaw import FILES, SOUL_LINE, truncation_marker

WORKSPACE = "openclaw/openclaw@0033b7033e2efd7e41875abc8fbba03618f7876d:src/agents/workspace.ts"
BOOTSTRAP = ("openclaw/openclaw@004e91311b556e48589a3beef31c6feb5737c4cc:"
             "src/agents/pi-embedded-helpers/bootstrap.ts")
PROMPT = "openclaw/openclaw@001473abf21b94dd3195be6cba805e520852dfb2:src/agents/system-prompt.ts"
# Where the npm release openclaw@2026.9.6 still behaves the same, its dist line as well
# (the release changed the file set, allowlists, truncation and section preamble since).
REL = "openclaw@2026.9.6:dist"
ORDER = f"{WORKSPACE}#loadWorkspaceBootstrapFiles"
MEMORY_OPTIONAL = f"{WORKSPACE}#loadWorkspaceBootstrapFiles (exactWorkspaceEntryExists); " \
    f"{REL}/workspace-DDLxBwAa.mjs:780"
SUBAGENT = f"{WORKSPACE}#SUBAGENT_BOOTSTRAP_ALLOWLIST"
CRON = f"{WORKSPACE}#CRON_BOOTSTRAP_ALLOWLIST"
GROUP = f"{WORKSPACE}#GROUP_CHANNEL_BOOTSTRAP_ALLOWLIST"
MISSING = f"{BOOTSTRAP}#buildBootstrapContextFiles; {REL}/bootstrap-Dvw1-bo8.mjs:249"
TRIM = f"{BOOTSTRAP}#trimBootstrapContent"
CLAMP = f"{BOOTSTRAP}#clampToBudget; {REL}/bootstrap-Dvw1-bo8.mjs:230"
MIN_BUDGET = f"{BOOTSTRAP}#MIN_BOOTSTRAP_FILE_BUDGET_CHARS; {REL}/bootstrap-Dvw1-bo8.mjs:56"
SECTIONS = f"{PROMPT}#buildAgentSystemPrompt (# Project Context, ## file.path)"

HEAD = "# Project Context\nThe following project context files have been loaded:"
ALL = {name: name.split(".")[0].lower() for name in FILES}
LONG = "".join(f"{i:03d}|" for i in range(38))[:150]
HUNDRED = "s" * 99 + "S"


def text(*sections: tuple[str, str], soul: bool | None = None) -> str:
    has_soul = any(p == "SOUL.md" for p, _ in sections) if soul is None else soul
    lines = [HEAD] + ([SOUL_LINE] if has_soul else [])
    for path, body in sections:
        lines += [f"## {path}", body]
    return "\n".join(lines)


def loaded(*names: str, files: dict[str, str] = ALL) -> tuple[tuple[str, str], ...]:
    return tuple((n, files.get(n, f"[MISSING] Expected at: {n}")) for n in names)


def mark(name: str, head: int, tail: int, total: int) -> str:
    return "\n" + truncation_marker(name, head, tail, total) + "\n"


def flags(*names: str) -> tuple[tuple[str, bool], ...]:
    return tuple((n, False) for n in names)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    src: str
    files: dict[str, str]
    text: str
    order: tuple[tuple[str, bool], ...]
    session: str = "main"
    cwd: str = ""
    options: ResolveOptions = field(default_factory=ResolveOptions)
    skipped: tuple[tuple[str, str], ...] | None = None


NOT_CRON = ("HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md")
CASES = (
    Case(id="main: all eight files in fixed order, one ## <path> section each", src=SECTIONS,
         files=ALL, text=text(*loaded(*FILES)), order=flags(*FILES)),
    Case(id="cwd is ignored: the workspace is the repo root", src=ORDER, files=ALL,
         cwd="svc/refund", text=text(*loaded(*FILES)), order=flags(*FILES)),
    Case(id="cron loads only AGENTS, TOOLS, SOUL, IDENTITY, USER", src=CRON, files=ALL,
         session="cron",
         text=text(*loaded("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md")),
         order=flags("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md"),
         skipped=tuple((n, "session filter") for n in NOT_CRON)),
    Case(id="cron with USER.md missing reads its [MISSING] line", src=CRON, session="cron",
         files={"AGENTS.md": "A", "HEARTBEAT.md": "h"},
         text=text(("AGENTS.md", "A"), *loaded("SOUL.md", "TOOLS.md", "IDENTITY.md",
                                                "USER.md", files={})),
         order=flags("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md"),
         skipped=(("HEARTBEAT.md", "session filter"), ("MEMORY.md", "optional, absent"))),
    Case(id="missing files read [MISSING] Expected at: <path>", src=MISSING,
         files={"AGENTS.md": "A\n\n", "MEMORY.md": "m"},
         text=text(("AGENTS.md", "A"), *loaded(*FILES[1:-1], files={}), ("MEMORY.md", "m")),
         order=flags(*FILES)),
    Case(id="an absent MEMORY.md is skipped, not [MISSING]", src=MEMORY_OPTIONAL,
         files={n: ALL[n] for n in FILES[:-1]}, text=text(*loaded(*FILES[:-1])),
         order=flags(*FILES[:-1]), skipped=(("MEMORY.md", "optional, absent"),)),
    Case(id="subagent gets only AGENTS.md and TOOLS.md", src=SUBAGENT, files=ALL,
         session="subagent", text=text(*loaded("AGENTS.md", "TOOLS.md")),
         order=flags("AGENTS.md", "TOOLS.md"),
         skipped=tuple((n, "session filter") for n in FILES
                       if n not in ("AGENTS.md", "TOOLS.md"))),
    Case(id="subagent with TOOLS.md missing", src=SUBAGENT,
         files={"AGENTS.md": "A", "MEMORY.md": "m"}, session="subagent",
         text=text(("AGENTS.md", "A"), ("TOOLS.md", "[MISSING] Expected at: TOOLS.md")),
         order=flags("AGENTS.md", "TOOLS.md"), skipped=(("MEMORY.md", "session filter"),)),
    Case(id="group (shared channel) never gets MEMORY.md", src=GROUP, files=ALL,
         session="group", text=text(*loaded(*FILES[:-1])), order=flags(*FILES[:-1]),
         skipped=(("MEMORY.md", "session filter"),)),
    Case(id="blank file is skipped, not missing", src=CLAMP, files={**ALL, "SOUL.md": " \n"},
         text=text(*loaded(*(n for n in FILES if n != "SOUL.md")), soul=False),
         order=flags(*(n for n in FILES if n != "SOUL.md")),
         skipped=(("SOUL.md", "empty"),)),
    Case(id="per-file cap: 70% head, marker, 20% tail", src=TRIM,
         files={**ALL, "TOOLS.md": LONG}, options=ResolveOptions(per_file_max_chars=100),
         text=text(*loaded("AGENTS.md", "SOUL.md"),
                   ("TOOLS.md", LONG[:70] + mark("TOOLS.md", 70, 20, 150) + LONG[-20:]),
                   *loaded(*FILES[3:])),
         order=(("AGENTS.md", False), ("SOUL.md", False), ("TOOLS.md", True),
                *flags(*FILES[3:]))),
    Case(id="exactly the per-file cap is not truncated", src=TRIM, files={"AGENTS.md": LONG},
         session="subagent", options=ResolveOptions(per_file_max_chars=150),
         text=text(("AGENTS.md", LONG), ("TOOLS.md", "[MISSING] Expected at: TOOLS.md")),
         order=flags("AGENTS.md", "TOOLS.md")),
    Case(id="total cap: under 64 left skips the rest", src=MIN_BUDGET,
         files={"AGENTS.md": LONG, "SOUL.md": HUNDRED},
         options=ResolveOptions(total_max_chars=200), text=text(("AGENTS.md", LONG), soul=False),
         order=flags("AGENTS.md"),
         skipped=(("MEMORY.md", "optional, absent"),
                  *((n, "budget exhausted") for n in FILES[1:-1]))),
    Case(id="total cap: a later file is cut to what is left and ends with an ellipsis",
         src=CLAMP, files={"AGENTS.md": LONG, "SOUL.md": HUNDRED},
         options=ResolveOptions(total_max_chars=230),
         text=text(("AGENTS.md", LONG),
                   ("SOUL.md", HUNDRED[:56] + mark("SOUL.md", 56, 16, 100)[:23] + "…")),
         order=(("AGENTS.md", False), ("SOUL.md", True)),
         skipped=(("MEMORY.md", "optional, absent"),
                  *((n, "budget exhausted") for n in FILES[2:-1]))),
    Case(id="total cap counts [MISSING] lines; 3 or fewer left is a plain cut", src=CLAMP,
         files={}, options=ResolveOptions(total_max_chars=35),
         text=text(("AGENTS.md", "[MISSING] Expected at: AGENTS.md"), ("SOUL.md", "[MI")),
         order=flags("AGENTS.md", "SOUL.md"),
         skipped=(("MEMORY.md", "optional, absent"),
                  *((n, "budget exhausted") for n in FILES[2:-1]))),
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


def test_cut_file_bytes_used_excludes_marker_and_ellipsis() -> None:
    res = resolve("openclaw", {"AGENTS.md": LONG, "SOUL.md": HUNDRED}, cwd="",
                  options=ResolveOptions(total_max_chars=230))
    assert [f.bytes_used for f in res.resolved_order] == [150, 56]


def test_nothing_loaded_is_empty_text() -> None:
    assert resolve("openclaw", {"MEMORY.md": "m"}, cwd="", session_type="cron").text == (
        text(*loaded("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", files={}),
             soul=True))
