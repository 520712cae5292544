"""Claude Code conformance: memory files, rules with ``paths:``, ``@`` imports, comments."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from app.core.bundles import ResolveOptions, resolve

API_RULE = '---\npaths:\n  - "src/api/**/*.ts"\n---\nAPI rule\n'
CHAIN = {"CLAUDE.md": "@h1.md", "h1.md": "1 @h2.md", "h2.md": "2 @h3.md", "h3.md": "3 @h4.md",
         "h4.md": "4 @h5.md", "h5.md": "5"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    files: dict[str, str]
    text: str
    order: tuple[str, ...]
    cwd: str = ""
    in_play: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str, str], ...] | None = None


CASES = (
    Case(id="layers concatenate: managed, user, root down to cwd, local after each",
         cwd="svc/refund",
         files={"managed/CLAUDE.md": "M", "~/.claude/CLAUDE.md": "U", "CLAUDE.md": "R",
                "CLAUDE.local.md": "RL", "svc/CLAUDE.md": "S", "svc/refund/CLAUDE.md": "F",
                "svc/refund/CLAUDE.local.md": "FL", "other/CLAUDE.md": "no"},
         text="M\n\nU\n\nR\n\nRL\n\nS\n\nF\n\nFL",
         order=("managed/CLAUDE.md", "~/.claude/CLAUDE.md", "CLAUDE.md", "CLAUDE.local.md",
                "svc/CLAUDE.md", "svc/refund/CLAUDE.md", "svc/refund/CLAUDE.local.md")),
    Case(id=".claude/CLAUDE.md when the directory has no CLAUDE.md", cwd="a",
         files={".claude/CLAUDE.md": "dot", "a/CLAUDE.md": "a", "a/.claude/CLAUDE.md": "hid"},
         text="dot\n\na", order=(".claude/CLAUDE.md", "a/CLAUDE.md"),
         skipped=(("a/.claude/CLAUDE.md", "shadowed", ""),)),
    Case(id="directory named CLAUDE.md is not a file", files={
        "CLAUDE.md/x.md": "no", ".claude/CLAUDE.md": "dot"},
         text="dot", order=(".claude/CLAUDE.md",)),
    Case(id="blank memory file skipped", files={"CLAUDE.md": "\n \n", "CLAUDE.local.md": "L"},
         text="L", order=("CLAUDE.local.md",), skipped=(("CLAUDE.md", "empty", ""),)),
    Case(id="import expands inline, relative to the importing file", files={
        "CLAUDE.md": "See @docs/style.md now.\n", "docs/style.md": "STYLE @tone.md\n",
        "docs/tone.md": "calm\n"},
         text="See STYLE calm now.", order=("CLAUDE.md", "docs/style.md", "docs/tone.md")),
    Case(id="./ and ~/ imports", cwd="a", files={
        "a/CLAUDE.md": "@./x.md and @~/prefs.md", "a/x.md": "X", "~/prefs.md": "P"},
         text="X and P", order=("a/CLAUDE.md", "a/x.md", "~/prefs.md")),
    Case(id="user memory imports from its own directory", files={
        "~/.claude/CLAUDE.md": "@extra.md", "~/.claude/extra.md": "E"},
         text="E", order=("~/.claude/CLAUDE.md", "~/.claude/extra.md")),
    Case(id="import cycle is not expanded again", files={
        "CLAUDE.md": "@a.md", "a.md": "A @b.md", "b.md": "B @a.md"},
         text="A B @a.md", order=("CLAUDE.md", "a.md", "b.md"),
         skipped=(("a.md", "import cycle", "b.md"),)),
    Case(id="self import is a cycle", files={"CLAUDE.md": "me @CLAUDE.md"},
         text="me @CLAUDE.md", order=("CLAUDE.md",),
         skipped=(("CLAUDE.md", "import cycle", "CLAUDE.md"),)),
    Case(id="5-hop chain: 4 hops expand, the 5th stays", files=CHAIN,
         text="1 2 3 4 @h5.md", order=("CLAUDE.md", "h1.md", "h2.md", "h3.md", "h4.md"),
         skipped=(("h5.md", "max import depth", "h4.md"),)),
    Case(id="missing import stays as written", files={"CLAUDE.md": "Read @docs/nope.md."},
         text="Read @docs/nope.md.", order=("CLAUDE.md",),
         skipped=(("docs/nope.md.", "unresolved import", "CLAUDE.md"),)),
    Case(id="import escaping the repo is unresolved", files={"CLAUDE.md": "@../up.md @/abs"},
         text="@../up.md @/abs", order=("CLAUDE.md",),
         skipped=(("../up.md", "unresolved import", "CLAUDE.md"),
                  ("/abs", "unresolved import", "CLAUDE.md"))),
    Case(id="imports inside fenced blocks are literal", files={
        "CLAUDE.md": "```md\n@a.md\n```\n~~~\n@a.md\n~~~~\n@a.md", "a.md": "A"},
         text="```md\n@a.md\n```\n~~~\n@a.md\n~~~~\nA", order=("CLAUDE.md", "a.md")),
    Case(id="unclosed fence runs to the end", files={"CLAUDE.md": "x\n````\n@a.md\n```",
                                                     "a.md": "A"},
         text="x\n````\n@a.md\n```", order=("CLAUDE.md",)),
    Case(id="imports inside inline code are literal", files={
        "CLAUDE.md": "Use `@a.md` or ``x @a.md`` then @a.md", "a.md": "A"},
         text="Use `@a.md` or ``x @a.md`` then A", order=("CLAUDE.md", "a.md")),
    Case(id="one-line triple backticks are a code span, not a fence", files={
        "CLAUDE.md": "```@a.md```\n@a.md", "a.md": "A"},
         text="```@a.md```\nA", order=("CLAUDE.md", "a.md")),
    Case(id="an email address is not an import", files={"CLAUDE.md": "mail ops@example.com"},
         text="mail ops@example.com", order=("CLAUDE.md",), skipped=()),
    Case(id="block HTML comments stripped, imports inside them ignored", files={
        "CLAUDE.md": "keep\n<!-- hidden\n@a.md\n-->\n  <!-- one line --> tail\nafter\n",
        "a.md": "A"},
         text="keep\n tail\nafter", order=("CLAUDE.md",), skipped=()),
    Case(id="inline and fenced comments stay", files={
        "CLAUDE.md": "text <!-- inline --> more\n```\n<!-- code -->\n```"},
         text="text <!-- inline --> more\n```\n<!-- code -->\n```", order=("CLAUDE.md",)),
    Case(id="comments stripped in imported files too", files={
        "CLAUDE.md": "@a.md", "a.md": "<!-- note -->\nA"},
         text="A", order=("CLAUDE.md", "a.md")),
    Case(id="rules without paths load after memory files, nested dirs, by path", files={
        "CLAUDE.md": "mem", ".claude/rules/z.md": "Z", ".claude/rules/fe/react.md": "R",
        ".claude/rules/notes.txt": "not md", "a/.claude/rules/x.md": "not root"},
         text="mem\n\nR\n\nZ",
         order=("CLAUDE.md", ".claude/rules/fe/react.md", ".claude/rules/z.md")),
    Case(id="paths rule loads when a file in play matches **", files={
        ".claude/rules/api.md": API_RULE, ".claude/rules/base.md": "base"},
         in_play=("src/api/v1/users/get.ts",), text="base\n\nAPI rule",
         order=(".claude/rules/base.md", ".claude/rules/api.md")),
    Case(id="** matches zero directories", files={".claude/rules/api.md": API_RULE},
         in_play=("./src/api/index.ts",), text="API rule", order=(".claude/rules/api.md",)),
    Case(id="paths rule skipped when nothing matches", files={".claude/rules/api.md": API_RULE},
         in_play=("src/api.ts", "src/apix/a.ts", "lib/src/api/a.ts"), text="", order=(),
         skipped=((".claude/rules/api.md", "paths not matched", ""),)),
    Case(id="paths as one string with braces", files={
        ".claude/rules/ui.md": "---\npaths: 'src/**/*.{ts,tsx}'\n---\nUI"},
         in_play=("src/App.tsx",), text="UI", order=(".claude/rules/ui.md",)),
    Case(id="paths as a flow list; * does not cross /", files={
        ".claude/rules/py.md": "---\ndescription: py\npaths: [\"*.py\", tests/*.py]\n---\nPY"},
         in_play=("pkg/mod.py",), text="", order=()),
    Case(id="conditional rule after unconditional even if it sorts first", files={
        ".claude/rules/a.md": "---\npaths:\n- docs/**\n---\nA", ".claude/rules/b.md": "B"},
         in_play=("docs/x/y.md",), text="B\n\nA",
         order=(".claude/rules/b.md", ".claude/rules/a.md")),
    Case(id="frontmatter without paths is stripped and loads at start", files={
        ".claude/rules/a.md": "---\ndescription: x\n---\nBody"},
         text="Body", order=(".claude/rules/a.md",)),
    Case(id="unclosed frontmatter is plain text", files={".claude/rules/a.md": "---\nBody"},
         text="---\nBody", order=(".claude/rules/a.md",)),
)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_claude_code_conformance(case: Case) -> None:
    res = resolve("claude-code", case.files, cwd=case.cwd,
                  options=ResolveOptions(files_in_play=case.in_play))
    assert res.text == case.text
    assert tuple(f.path for f in res.resolved_order) == case.order
    assert not any(f.truncated for f in res.resolved_order)
    if case.skipped is not None:
        assert tuple((s.path, s.reason, s.source) for s in res.skipped) == case.skipped


def test_layers_and_bytes() -> None:
    res = resolve("claude-code", {"managed/CLAUDE.md": "M", "~/.claude/CLAUDE.md": "U",
                                  "CLAUDE.md": "<!-- x -->\nR @a.md", "a.md": "A",
                                  "CLAUDE.local.md": "L", ".claude/rules/r.md": "X"}, cwd="")
    assert [f.layer for f in res.resolved_order] == [
        "managed", "user", "project", "import", "local", "rule"]
    project = res.resolved_order[2]
    assert (project.bytes_in, project.bytes_used) == (len("<!-- x -->\nR @a.md"), len("R @a.md"))


def test_import_depth_is_an_option() -> None:
    res = resolve("claude-code", CHAIN, cwd="", options=ResolveOptions(max_import_depth=5))
    assert res.text == "1 2 3 4 5"
