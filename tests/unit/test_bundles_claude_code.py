"""Claude Code conformance: memory files, rules with ``paths:``, ``@`` imports, comments."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from app.core.bundles import ResolveOptions, resolve

# Claude Code is not open source: rows cite its public memory documentation, by section.
DOC = "https://code.claude.com/docs/en/memory"
HIERARCHY = f"{DOC} (Choose where to put CLAUDE.md files; How CLAUDE.md files load)"
IMPORTS = f"{DOC} (Import additional files: relative to the importing file, ~ home, " \
    "maximum depth of five hops)"
CODE = f"{DOC} (Import additional files: not evaluated inside code spans or code blocks)"
COMMENTS = f"{DOC} (How CLAUDE.md files load: block-level HTML comments are stripped)"
RULES = f"{DOC} (Organize rules with .claude/rules/: discovered recursively, no paths " \
    "frontmatter loads at launch with the priority of .claude/CLAUDE.md)"
PATH_RULES = f"{DOC} (Path-specific rules: paths frontmatter globs, load when Claude " \
    "works with matching files)"
USER_RULES = f"{DOC} (User-level rules: ~/.claude/rules/, loaded before project rules)"
API_RULE = '---\npaths:\n  - "src/api/**/*.ts"\n---\nAPI rule\n'
CHAIN = {"CLAUDE.md": "@h1.md", "h1.md": "1 @h2.md", "h2.md": "2 @h3.md", "h3.md": "3 @h4.md",
         "h4.md": "4 @h5.md", "h5.md": "5 @h6.md", "h6.md": "6"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    src: str
    files: dict[str, str]
    text: str
    order: tuple[str, ...]
    cwd: str = ""
    in_play: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str, str], ...] | None = None


CASES = (
    Case(id="layers concatenate: managed, user, root down to cwd, local after each", src=HIERARCHY,
         cwd="svc/refund",
         files={"managed/CLAUDE.md": "M", "~/.claude/CLAUDE.md": "U", "CLAUDE.md": "R",
                "CLAUDE.local.md": "RL", "svc/CLAUDE.md": "S", "svc/refund/CLAUDE.md": "F",
                "svc/refund/CLAUDE.local.md": "FL", "other/CLAUDE.md": "no"},
         text="M\n\nU\n\nR\n\nRL\n\nS\n\nF\n\nFL",
         order=("managed/CLAUDE.md", "~/.claude/CLAUDE.md", "CLAUDE.md", "CLAUDE.local.md",
                "svc/CLAUDE.md", "svc/refund/CLAUDE.md", "svc/refund/CLAUDE.local.md")),
    Case(id=".claude/CLAUDE.md when the directory has no CLAUDE.md", src=HIERARCHY, cwd="a",
         files={".claude/CLAUDE.md": "dot", "a/CLAUDE.md": "a", "a/.claude/CLAUDE.md": "hid"},
         text="dot\n\na", order=(".claude/CLAUDE.md", "a/CLAUDE.md"),
         skipped=(("a/.claude/CLAUDE.md", "shadowed", ""),)),
    Case(id="directory named CLAUDE.md is not a file", src=HIERARCHY, files={
        "CLAUDE.md/x.md": "no", ".claude/CLAUDE.md": "dot"},
         text="dot", order=(".claude/CLAUDE.md",)),
    Case(id="blank memory file skipped", src=HIERARCHY,
         files={"CLAUDE.md": "\n \n", "CLAUDE.local.md": "L"},
         text="L", order=("CLAUDE.local.md",), skipped=(("CLAUDE.md", "empty", ""),)),
    Case(id="import expands inline, relative to the importing file", src=IMPORTS, files={
        "CLAUDE.md": "See @docs/style.md now.\n", "docs/style.md": "STYLE @tone.md\n",
        "docs/tone.md": "calm\n"},
         text="See STYLE calm now.", order=("CLAUDE.md", "docs/style.md", "docs/tone.md")),
    Case(id="./ and ~/ imports", src=IMPORTS, cwd="a", files={
        "a/CLAUDE.md": "@./x.md and @~/prefs.md", "a/x.md": "X", "~/prefs.md": "P"},
         text="X and P", order=("a/CLAUDE.md", "a/x.md", "~/prefs.md")),
    Case(id="user memory imports from its own directory", src=IMPORTS, files={
        "~/.claude/CLAUDE.md": "@extra.md", "~/.claude/extra.md": "E"},
         text="E", order=("~/.claude/CLAUDE.md", "~/.claude/extra.md")),
    Case(id="import cycle is not expanded again", src=IMPORTS, files={
        "CLAUDE.md": "@a.md", "a.md": "A @b.md", "b.md": "B @a.md"},
         text="A B @a.md", order=("CLAUDE.md", "a.md", "b.md"),
         skipped=(("a.md", "import cycle", "b.md"),)),
    Case(id="self import is a cycle", src=IMPORTS, files={"CLAUDE.md": "me @CLAUDE.md"},
         text="me @CLAUDE.md", order=("CLAUDE.md",),
         skipped=(("CLAUDE.md", "import cycle", "CLAUDE.md"),)),
    Case(id="five hops expand, the 6th stays as written", src=IMPORTS, files=CHAIN,
         text="1 2 3 4 5 @h6.md",
         order=("CLAUDE.md", "h1.md", "h2.md", "h3.md", "h4.md", "h5.md"),
         skipped=(("h6.md", "max import depth", "h5.md"),)),
    Case(id="missing import stays as written", src=IMPORTS,
         files={"CLAUDE.md": "Read @docs/nope.md."},
         text="Read @docs/nope.md.", order=("CLAUDE.md",),
         skipped=(("docs/nope.md.", "unresolved import", "CLAUDE.md"),)),
    Case(id="import escaping the repo is unresolved", src=IMPORTS,
         files={"CLAUDE.md": "@../up.md @/abs"},
         text="@../up.md @/abs", order=("CLAUDE.md",),
         skipped=(("../up.md", "unresolved import", "CLAUDE.md"),
                  ("/abs", "unresolved import", "CLAUDE.md"))),
    Case(id="imports inside fenced blocks are literal", src=CODE, files={
        "CLAUDE.md": "```md\n@a.md\n```\n~~~\n@a.md\n~~~~\n@a.md", "a.md": "A"},
         text="```md\n@a.md\n```\n~~~\n@a.md\n~~~~\nA", order=("CLAUDE.md", "a.md")),
    Case(id="unclosed fence runs to the end", src=CODE, files={"CLAUDE.md": "x\n````\n@a.md\n```",
                                                     "a.md": "A"},
         text="x\n````\n@a.md\n```", order=("CLAUDE.md",)),
    Case(id="imports inside inline code are literal", src=CODE, files={
        "CLAUDE.md": "Use `@a.md` or ``x @a.md`` then @a.md", "a.md": "A"},
         text="Use `@a.md` or ``x @a.md`` then A", order=("CLAUDE.md", "a.md")),
    Case(id="one-line triple backticks are a code span, not a fence", src=CODE, files={
        "CLAUDE.md": "```@a.md```\n@a.md", "a.md": "A"},
         text="```@a.md```\nA", order=("CLAUDE.md", "a.md")),
    Case(id="an email address is not an import", src=IMPORTS,
         files={"CLAUDE.md": "mail ops@example.com"},
         text="mail ops@example.com", order=("CLAUDE.md",), skipped=()),
    Case(id="block HTML comments stripped, imports inside them ignored", src=COMMENTS, files={
        "CLAUDE.md": "keep\n<!-- hidden\n@a.md\n-->\n  <!-- one line --> tail\nafter\n",
        "a.md": "A"},
         text="keep\n tail\nafter", order=("CLAUDE.md",), skipped=()),
    Case(id="inline and fenced comments stay", src=COMMENTS, files={
        "CLAUDE.md": "text <!-- inline --> more\n```\n<!-- code -->\n```"},
         text="text <!-- inline --> more\n```\n<!-- code -->\n```", order=("CLAUDE.md",)),
    Case(id="comments stripped in imported files too", src=COMMENTS, files={
        "CLAUDE.md": "@a.md", "a.md": "<!-- note -->\nA"},
         text="A", order=("CLAUDE.md", "a.md")),
    Case(id="rules without paths load after memory files, nested dirs, by path", src=RULES, files={
        "CLAUDE.md": "mem", ".claude/rules/z.md": "Z", ".claude/rules/fe/react.md": "R",
        ".claude/rules/notes.txt": "not md", "a/.claude/rules/x.md": "not root"},
         text="mem\n\nR\n\nZ",
         order=("CLAUDE.md", ".claude/rules/fe/react.md", ".claude/rules/z.md")),
    Case(id="paths rule loads when a file in play matches **", src=PATH_RULES, files={
        ".claude/rules/api.md": API_RULE, ".claude/rules/base.md": "base"},
         in_play=("src/api/v1/users/get.ts",), text="base\n\nAPI rule",
         order=(".claude/rules/base.md", ".claude/rules/api.md")),
    Case(id="** matches zero directories", src=PATH_RULES, files={".claude/rules/api.md": API_RULE},
         in_play=("./src/api/index.ts",), text="API rule", order=(".claude/rules/api.md",)),
    Case(id="paths rule skipped when nothing matches", src=PATH_RULES,
         files={".claude/rules/api.md": API_RULE},
         in_play=("src/api.ts", "src/apix/a.ts", "lib/src/api/a.ts"), text="", order=(),
         skipped=((".claude/rules/api.md", "paths not matched", ""),)),
    Case(id="paths as one string with braces", src=PATH_RULES, files={
        ".claude/rules/ui.md": "---\npaths: 'src/**/*.{ts,tsx}'\n---\nUI"},
         in_play=("src/App.tsx",), text="UI", order=(".claude/rules/ui.md",)),
    Case(id="paths as a flow list; * does not cross /", src=PATH_RULES, files={
        ".claude/rules/py.md": "---\ndescription: py\npaths: [\"*.py\", tests/*.py]\n---\nPY"},
         in_play=("pkg/mod.py",), text="", order=()),
    Case(id="conditional rule after unconditional even if it sorts first", src=PATH_RULES, files={
        ".claude/rules/a.md": "---\npaths:\n- docs/**\n---\nA", ".claude/rules/b.md": "B"},
         in_play=("docs/x/y.md",), text="B\n\nA",
         order=(".claude/rules/b.md", ".claude/rules/a.md")),
    Case(id="user rules load after user memory, before project memory and rules",
         src=USER_RULES, cwd="a", files={
             "~/.claude/CLAUDE.md": "U", "~/.claude/rules/style.md": "US",
             "~/.claude/rules/go.md": "---\npaths: ['**/*.go']\n---\nUGO",
             "CLAUDE.md": "R", "a/CLAUDE.md": "A", ".claude/rules/p.md": "P",
             ".claude/rules/t.md": "---\npaths: ['**/*_test.go']\n---\nPT"},
         in_play=("a/x_test.go",), text="U\n\nUS\n\nR\n\nA\n\nP\n\nUGO\n\nPT",
         order=("~/.claude/CLAUDE.md", "~/.claude/rules/style.md", "CLAUDE.md", "a/CLAUDE.md",
                ".claude/rules/p.md", "~/.claude/rules/go.md", ".claude/rules/t.md")),
    Case(id="a user path-scoped rule waits for a matching file", src=USER_RULES, files={
        "~/.claude/rules/go.md": "---\npaths: ['**/*.go']\n---\nUGO"},
         in_play=("README.md",), text="", order=(),
         skipped=(("~/.claude/rules/go.md", "paths not matched", ""),)),
    Case(id="frontmatter without paths is stripped and loads at start", src=RULES, files={
        ".claude/rules/a.md": "---\ndescription: x\n---\nBody"},
         text="Body", order=(".claude/rules/a.md",)),
    Case(id="unclosed frontmatter is plain text", src=RULES,
         files={".claude/rules/a.md": "---\nBody"},
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
    res = resolve("claude-code", CHAIN, cwd="", options=ResolveOptions(max_import_depth=6))
    assert res.text == "1 2 3 4 5 6"
