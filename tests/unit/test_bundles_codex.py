"""Codex conformance: global AGENTS, project docs from the git root down, byte budget."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pytest

from app.core.bundles import ResolveOptions, resolve

SEP = "\n\n--- project-doc ---\n\n"
GIT = {".git/HEAD": "ref: refs/heads/main\n"}
# Where each case comes from (repo@commit:path:line). Global AGENTS.md moved out of
# agents_md.rs after 9e5f1c37; the project-doc loop is unchanged between the two commits.
AGENTS_MD = "openai/codex@0cf644af40f76ffdfbac134b4b17aca78e8dcef5:codex-rs/core/src/agents_md.rs"
GLOBAL = "openai/codex@9e5f1c37cc095c3d0f69a19f17455376fb12a9d8:codex-rs/core/src/agents_md.rs:101"
SEPARATOR = f"{AGENTS_MD}:44"
ROOT_MARKERS = f"{AGENTS_MD}:208"
ROOT_TO_CWD = f"{AGENTS_MD}:230"
FIRST_FILE = f"{AGENTS_MD}:256"
CANDIDATES = f"{AGENTS_MD}:270"
BUDGET_ZERO = f"{AGENTS_MD}:113"
REMAINING = f"{AGENTS_MD}:126"
TRUNCATE = f"{AGENTS_MD}:147"
LOSSY = f"{AGENTS_MD}:158"


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    src: str
    files: dict[str, str]
    cwd: str
    text: str
    order: tuple[tuple[str, bool], ...]
    options: ResolveOptions = field(default_factory=ResolveOptions)
    skipped: tuple[tuple[str, str], ...] | None = None


CASES = (
    Case(id="global only, trimmed", src=GLOBAL, cwd="",
         files={"~/.codex/AGENTS.md": "  global rules \n"},
         text="global rules", order=(("~/.codex/AGENTS.md", False),)),
    Case(id="global override wins", src=GLOBAL, cwd="",
         files={"~/.codex/AGENTS.override.md": "O", "~/.codex/AGENTS.md": "A"},
         text="O", order=(("~/.codex/AGENTS.override.md", False),),
         skipped=(("~/.codex/AGENTS.md", "shadowed"),)),
    Case(id="empty global override falls through", src=GLOBAL, cwd="",
         files={"~/.codex/AGENTS.override.md": " \n", "~/.codex/AGENTS.md": "A"},
         text="A", order=(("~/.codex/AGENTS.md", False),),
         skipped=(("~/.codex/AGENTS.override.md", "empty"),)),
    Case(id="global then separator then project docs", src=SEPARATOR, cwd="",
         files={**GIT, "~/.codex/AGENTS.md": "G", "AGENTS.md": "P"},
         text=f"G{SEP}P", order=(("~/.codex/AGENTS.md", False), ("AGENTS.md", False))),
    Case(id="project docs only, no separator", src=SEPARATOR, cwd="",
         files={**GIT, "AGENTS.md": "P\n"}, text="P\n", order=(("AGENTS.md", False),)),
    Case(id="deep cwd: root down to cwd, one blank line between", src=ROOT_TO_CWD, cwd="a/b/c",
         files={**GIT, "AGENTS.md": "root", "a/AGENTS.md": "a", "a/b/c/AGENTS.md": "c",
                "a/b/c/d/AGENTS.md": "below cwd", "x/AGENTS.md": "sibling"},
         text="root\n\na\n\nc",
         order=(("AGENTS.md", False), ("a/AGENTS.md", False), ("a/b/c/AGENTS.md", False))),
    Case(id="cwd '.' is the root", src=ROOT_TO_CWD, cwd=".", files={**GIT, "AGENTS.md": "root"},
         text="root", order=(("AGENTS.md", False),)),
    Case(id="project override wins in its directory", src=CANDIDATES, cwd="svc",
         files={**GIT, "svc/AGENTS.override.md": "O", "svc/AGENTS.md": "A"},
         text="O", order=(("svc/AGENTS.override.md", False),),
         skipped=(("svc/AGENTS.md", "shadowed"),)),
    Case(id="empty project override shadows AGENTS.md (codex picks the first file)", src=FIRST_FILE,
         cwd="svc",
         files={**GIT, "AGENTS.md": "root", "svc/AGENTS.override.md": "",
                "svc/AGENTS.md": "svc"},
         text="root", order=(("AGENTS.md", False),),
         skipped=(("svc/AGENTS.md", "shadowed"), ("svc/AGENTS.override.md", "empty"))),
    Case(id="whitespace-only file is dropped", src=LOSSY, cwd="a",
         files={**GIT, "AGENTS.md": " \n\t\n", "a/AGENTS.md": "a"},
         text="a", order=(("a/AGENTS.md", False),), skipped=(("AGENTS.md", "empty"),)),
    Case(id="directory named like a file is not a file", src=FIRST_FILE, cwd="",
         files={**GIT, "AGENTS.override.md/notes.txt": "not a doc", "AGENTS.md": "real"},
         text="real", order=(("AGENTS.md", False),)),
    Case(id="directory AGENTS.md falls through to a fallback name", src=FIRST_FILE, cwd="",
         files={**GIT, "AGENTS.md/x.md": "no", "CONTRIBUTING.md": "contrib"},
         options=ResolveOptions(fallback_names=("", "AGENTS.md", "CONTRIBUTING.md")),
         text="contrib", order=(("CONTRIBUTING.md", False),)),
    Case(id="fallback names in configured order", src=CANDIDATES, cwd="",
         files={**GIT, "CLAUDE.md": "claude", "README.md": "readme"},
         options=ResolveOptions(fallback_names=("README.md", "CLAUDE.md")),
         text="readme", order=(("README.md", False),),
         skipped=(("CLAUDE.md", "shadowed"),)),
    Case(id="no root marker: only cwd is searched", src=ROOT_TO_CWD, cwd="a",
         files={"AGENTS.md": "root", "a/AGENTS.md": "a"},
         text="a", order=(("a/AGENTS.md", False),)),
    Case(id="no root marker and nothing in cwd", src=ROOT_TO_CWD, cwd="a/b",
         files={"AGENTS.md": "root"},
         text="", order=()),
    Case(id=".git file (worktree) marks the nearest root", src=ROOT_MARKERS, cwd="mod/x",
         files={**GIT, "AGENTS.md": "outer", "mod/.git": "gitdir: ../.git/modules/mod",
                "mod/AGENTS.md": "mod", "mod/x/AGENTS.md": "x"},
         text="mod\n\nx", order=(("mod/AGENTS.md", False), ("mod/x/AGENTS.md", False))),
    Case(id="custom root markers", src=ROOT_MARKERS, cwd="a",
         files={".hg/store": "", "AGENTS.md": "root", "a/AGENTS.md": "a"},
         options=ResolveOptions(root_markers=(".hg",)),
         text="root\n\na", order=(("AGENTS.md", False), ("a/AGENTS.md", False))),
    Case(id="budget exactly exhausted: next file skipped", src=REMAINING, cwd="a",
         files={**GIT, "AGENTS.md": "0123456789", "a/AGENTS.md": "next"},
         options=ResolveOptions(project_doc_max_bytes=10),
         text="0123456789", order=(("AGENTS.md", False),),
         skipped=(("a/AGENTS.md", "budget exhausted"),)),
    Case(id="later file truncated to the remaining budget", src=TRUNCATE, cwd="a/b",
         files={**GIT, "AGENTS.md": "abcde", "a/AGENTS.md": "fghij", "a/b/AGENTS.md": "k"},
         options=ResolveOptions(project_doc_max_bytes=8),
         text="abcde\n\nfgh", order=(("AGENTS.md", False), ("a/AGENTS.md", True)),
         skipped=(("a/b/AGENTS.md", "budget exhausted"),)),
    Case(id="blank file spends no budget", src=LOSSY, cwd="a",
         files={**GIT, "AGENTS.md": "   ", "a/AGENTS.md": "abc"},
         options=ResolveOptions(project_doc_max_bytes=3),
         text="abc", order=(("a/AGENTS.md", False),)),
    Case(id="budget 0 disables project docs, global stays", src=BUDGET_ZERO, cwd="",
         files={**GIT, "~/.codex/AGENTS.md": "G", "AGENTS.md": "P"},
         options=ResolveOptions(project_doc_max_bytes=0),
         text="G", order=(("~/.codex/AGENTS.md", False),),
         skipped=(("AGENTS.md", "budget disabled"),)),
    Case(id="UTF-8 character split at the budget reads as U+FFFD (from_utf8_lossy)",
         src=LOSSY, cwd="a", files={**GIT, "AGENTS.md": "ab€x", "a/AGENTS.md": "next"},
         options=ResolveOptions(project_doc_max_bytes=4),
         text="ab\ufffd", order=(("AGENTS.md", True),),
         skipped=(("a/AGENTS.md", "budget exhausted"),)),
    Case(id="a 4-byte character cut after 3 bytes is one U+FFFD; budget spent in bytes kept",
         src=TRUNCATE, cwd="a", files={**GIT, "AGENTS.md": "ab\U0001f600", "a/AGENTS.md": "cd"},
         options=ResolveOptions(project_doc_max_bytes=5),
         text="ab\ufffd",
         order=(("AGENTS.md", True),), skipped=(("a/AGENTS.md", "budget exhausted"),)),
    Case(id="UTF-8 boundary exactly on a character", src=TRUNCATE, cwd="",
         files={**GIT, "AGENTS.md": "ab€x"}, options=ResolveOptions(project_doc_max_bytes=5),
         text="ab€", order=(("AGENTS.md", True),)),
)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_codex_conformance(case: Case) -> None:
    res = resolve("codex", case.files, cwd=case.cwd, options=case.options)
    assert res.text == case.text
    assert tuple((f.path, f.truncated) for f in res.resolved_order) == case.order
    if case.skipped is not None:
        assert tuple((s.path, s.reason) for s in res.skipped) == case.skipped


def test_byte_accounting_and_digest() -> None:
    res = resolve("codex", {**GIT, "AGENTS.md": "ab€x"}, cwd="",
                  options=ResolveOptions(project_doc_max_bytes=4))
    (entry,) = res.resolved_order
    # "ab" plus the U+FFFD that stands for the cut "€" (3 bytes in UTF-8)
    assert (entry.bytes_in, entry.bytes_used, entry.reason) == (6, 5, "truncated")
    assert entry.sha256 == hashlib.sha256("ab€x".encode()).hexdigest()
    assert res.skipped == ()


def test_session_type_does_not_change_codex() -> None:
    files = {**GIT, "AGENTS.md": "P"}
    assert resolve("codex", files, cwd="", session_type="subagent") == resolve(
        "codex", files, cwd="")


INVALID: tuple[tuple[str, str, dict[str, str], str, str], ...] = (
    ("absolute cwd", "codex", {}, "/etc", "main"),
    ("dotdot escapes", "codex", {}, "a/../../x", "main"),
    ("bare dotdot", "hermes", {}, "..", "main"),
    ("NUL in cwd", "claude-code", {}, "a\x00b", "main"),
    ("global area cwd", "codex", {}, "~/.codex", "main"),
    ("unknown runtime", "cursor", {}, "", "main"),
    ("unknown session type", "openclaw", {}, "", "batch"),
    ("absolute bundle path", "codex", {"/etc/passwd": "x"}, "", "main"),
    ("escaping bundle path", "codex", {"../x.md": "x"}, "", "main"),
    ("duplicate bundle path", "codex", {"a.md": "x", "./a.md": "y"}, "", "main"),
)


@pytest.mark.parametrize(("runtime", "files", "cwd", "session_type"),
                         [row[1:] for row in INVALID], ids=[row[0] for row in INVALID])
def test_invalid_input_is_a_value_error(runtime: str, files: dict[str, str], cwd: str,
                                        session_type: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        resolve(runtime, files, cwd=cwd, session_type=session_type)


def test_cwd_is_normalized() -> None:
    files = {**GIT, "a/b/AGENTS.md": "b"}
    assert resolve("codex", files, cwd="a/./x/../b/").text == "b"
