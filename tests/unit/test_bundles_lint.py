"""Lint over resolutions: imports, budget, non-enforceable permissions, cross-file conflicts."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from app.core.bundles import ResolveOptions, lint, resolve
from app.core.bundles.lint import polarity, terms

GIT = {".git/HEAD": "ref: refs/heads/main\n"}
PERM = "lint.non_enforceable_permission"


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    runtime: str
    files: dict[str, str]
    findings: tuple[tuple[str, str, str], ...]  # (type, path, other_path)
    cwd: str = ""
    options: ResolveOptions = field(default_factory=ResolveOptions)


CASES = (
    Case(id="clean bundle", runtime="claude-code",
         files={"CLAUDE.md": "Use tabs for indentation.\nKeep functions short."}, findings=()),
    Case(id="unresolved import", runtime="claude-code", files={"CLAUDE.md": "@docs/x.md"},
         findings=(("lint.unresolved_import", "CLAUDE.md", "docs/x.md"),)),
    Case(id="import cycle", runtime="claude-code",
         files={"CLAUDE.md": "@a.md", "a.md": "@CLAUDE.md"},
         findings=(("lint.import_cycle", "a.md", "CLAUDE.md"),)),
    Case(id="max import depth", runtime="claude-code",
         files={"CLAUDE.md": "@1.md", "1.md": "@2.md", "2.md": "@3.md", "3.md": "@4.md",
                "4.md": "@5.md", "5.md": "@6.md", "6.md": "six"},
         findings=(("lint.max_import_depth", "5.md", "6.md"),)),
    Case(id="over budget: truncated and exhausted", runtime="codex", cwd="a/b",
         files={**GIT, "AGENTS.md": "abcdef", "a/AGENTS.md": "ghijkl", "a/b/AGENTS.md": "m"},
         options=ResolveOptions(project_doc_max_bytes=8),
         findings=(("lint.over_budget", "a/b/AGENTS.md", ""),
                   ("lint.over_budget", "a/AGENTS.md", ""))),
    Case(id="over budget: hermes truncation", runtime="hermes",
         files={"AGENTS.md": "x" * 50}, options=ResolveOptions(max_chars=10),
         findings=(("lint.over_budget", "AGENTS.md", ""),)),
    Case(id="permission grants and denials in English", runtime="codex",
         files={"AGENTS.md": "You may read .env files. You can push to main.\n"
                             "The bot is allowed to deploy on Fridays.\n"
                             "Never delete production data! Do not read .env."},
         findings=((PERM, "AGENTS.md", ""),) * 5),
    Case(id="permission in Chinese", runtime="openclaw",
         files={"AGENTS.md": "你可以读取生产数据库。允许推送到主分支。禁止删除日志。"},
         findings=((PERM, "AGENTS.md", ""),) * 3),
    Case(id="permission inside a fenced block or comment is not a rule", runtime="claude-code",
         files={"CLAUDE.md": "```sh\n# never delete this\n```\n<!-- you may read .env -->\nok"},
         findings=()),
    Case(id="conflict across layers", runtime="codex",
         files={**GIT, "~/.codex/AGENTS.md": "Always squash commits on feature branches.",
                "AGENTS.md": "Keep history: do not squash commits on feature branches."},
         findings=(("lint.conflict", "~/.codex/AGENTS.md", "AGENTS.md"),)),
    Case(id="same polarity is not a conflict", runtime="codex",
         files={**GIT, "~/.codex/AGENTS.md": "Always squash commits on feature branches.",
                "AGENTS.md": "You must squash commits on feature branches."},
         findings=()),
    Case(id="fewer than three shared terms is not a conflict", runtime="codex",
         files={**GIT, "~/.codex/AGENTS.md": "Always squash commits.",
                "AGENTS.md": "Never squash merges of commits."},
         findings=()),
    Case(id="conflict in Chinese", runtime="claude-code",
         files={"CLAUDE.md": "提交代码前必须格式化所有文件。",
                "CLAUDE.local.md": "提交代码前不要格式化所有文件。"},
         findings=(("lint.conflict", "CLAUDE.md", "CLAUDE.local.md"),)),
    Case(id="only files in the resolution are read", runtime="codex", cwd="a",
         files={**GIT, "AGENTS.md": "Always squash commits on feature branches.",
                "b/AGENTS.md": "Never squash commits on feature branches."},
         findings=()),
)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_lint_findings(case: Case) -> None:
    res = resolve(case.runtime, case.files, cwd=case.cwd, options=case.options)
    found = lint(case.runtime, case.files, res)
    assert tuple((f.type, f.path, f.other_path) for f in found) == case.findings
    assert all(f.message for f in found)


def test_conflict_records_both_sentences() -> None:
    files = {**GIT, "~/.codex/AGENTS.md": "Always squash commits on feature branches.",
             "AGENTS.md": "Do not squash commits on feature branches."}
    res = resolve("codex", files, cwd="")
    (finding,) = lint("codex", files, res)
    assert finding.excerpt == ("Always squash commits on feature branches | "
                               "Do not squash commits on feature branches")


def test_polarity_and_terms() -> None:
    assert polarity("You must not push to main") == -1
    assert polarity("Always run the linter") == 1
    assert polarity("The linter is ruff") == 0
    assert terms("Never run the integration tests") == frozenset(
        {"run", "integration", "tests"})


def test_lint_rejects_unknown_runtime() -> None:
    res = resolve("codex", {}, cwd="")
    with pytest.raises(ValueError, match="unknown runtime"):
        lint("cursor", {}, res)
