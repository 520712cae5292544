"""Rule-file hazards that block a promotion: what no agent should load as reviewed rules.

Contract: ``hazards(files, injection=...)`` returns ``LintFinding``s, in path then kind
order, of the types in ``BLOCKING`` (secrets are found by the service's secret detectors as
``lint.secret``, also blocking). It reads each file's raw text, code fences included: a
``curl … | sh`` in a fence is still a command an agent will run.

* ``lint.injection``         an injection finding of a type in ``INJECTION_TYPES`` (override,
                             exfiltration, reveal). Not ``role``, ``addressed`` or
                             ``tool_coercion``: rule files legitimately say "you are…", "before
                             you commit, run the tests first", "call the deploy tool".
* ``lint.remote_script``     a remote script piped into an interpreter: ``curl … | sh``,
                             ``wget -O- … | bash``, ``iwr … | iex``, ``bash <(curl …)``.
* ``lint.permission_grant``  a rule that waives an approval: "you may skip approval", "always
                             allow …", "no need to ask for permission", auto-approve flags
                             (``--dangerously-skip-permissions``, ``bypassPermissions``,
                             ``approval_policy = "never"``); 无需确认, 跳过审批, 总是允许.

At most ``MAX_PER_FILE`` findings of one type per file; an excerpt names where.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice

from app.core.bundles.lint import EXCERPT_CHARS, LintFinding
from app.core.guards.safety import Detector

BLOCKING = frozenset({"lint.injection", "lint.remote_script", "lint.permission_grant",
                      "lint.secret"})
INJECTION_TYPES = frozenset({"injection.override", "injection.exfiltration",
                             "injection.reveal"})
MAX_PER_FILE = 10

_SHELL = r"(?:sudo\s+(?:-\S+\s+)*)?(?:ba|z|k|da|fi)?sh\b"
_REMOTE_SCRIPT = re.compile(
    rf"\b(?:curl|wget|fetch)\b[^\n|;]{{0,300}}\|\s*(?:{_SHELL}|(?:sudo\s+)?python[23]?\b|"
    r"(?:sudo\s+)?(?:perl|ruby|node)\b)"
    r"|\b(?:ba|z)?sh\s+(?:-c\s+)?[\"']?(?:<\(|\$\()\s*(?:curl|wget)\b"
    r"|\b(?:iwr|irm|invoke-webrequest|invoke-restmethod)\b[^\n|;]{0,300}\|\s*"
    r"(?:iex|invoke-expression)\b"
    r"|\b(?:iex|invoke-expression)\s*\(?\s*\(?\s*(?:new-object\s+net\.webclient|iwr|irm|"
    r"invoke-webrequest|invoke-restmethod)\b",
    re.IGNORECASE)
_PERMISSION_GRANT = re.compile(
    r"\b(?:you\s+(?:may|can|are\s+allowed\s+to)|feel\s+free\s+to|it'?s\s+ok(?:ay)?\s+to)\s+"
    r"(?:always\s+)?(?:skip|bypass|ignore|disable|omit)\s+(?:the\s+|any\s+|all\s+)?"
    r"(?:approvals?|reviews?|confirmations?|permissions?|permission\s+(?:checks?|prompts?)|"
    r"sandbox(?:ing)?|safety\s+checks?|code\s+review)\b"
    r"|\b(?:always|automatically|auto-?)\s*(?:allow|approve|accept|grant)\b"
    r"|\b(?:no\s+need|(?:you\s+)?(?:do\s+not|don't)\s+need)\s+to\s+ask\s+(?:for\s+|the\s+user\s+"
    r"(?:for\s+)?)?(?:permission|approval|confirmation)"
    r"|\bwithout\s+(?:asking|requesting|waiting)\s+(?:for\s+)?(?:permission|approval|"
    r"confirmation)"
    r"|--dangerously-skip-permissions|\bbypassPermissions\b|--yolo\b"
    r"|\bapproval[_-]policy\s*[=:]\s*[\"']?never"
    r"|无需(?:确认|审批|批准|授权|许可)|不用(?:确认|审批|请示)|跳过(?:审批|确认|审核|权限)|"
    r"(?:总是|始终|自动)(?:允许|批准|同意)",
    re.IGNORECASE)


def _excerpt(text: str, start: int, end: int) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line = text[line_start: line_end if line_end >= 0 else len(text)]
    return " ".join(line.split())[:EXCERPT_CHARS]


def _file_hazards(path: str, text: str, injection: Sequence[Detector]
                  ) -> Iterator[LintFinding]:
    found = sorted({(f.type, f.start, f.end) for d in injection for f in d(text)
                    if f.type in INJECTION_TYPES}, key=lambda t: t[1])
    for type_, start, end in found[:MAX_PER_FILE]:
        yield LintFinding(type="lint.injection", path=path, excerpt=_excerpt(text, start, end),
                          message=f"{path}: {type_} in a rule file")
    for kind, pattern, what in (
            ("lint.remote_script", _REMOTE_SCRIPT, "a remote script piped into an interpreter"),
            ("lint.permission_grant", _PERMISSION_GRANT, "a rule that waives an approval")):
        for m in islice(pattern.finditer(text), MAX_PER_FILE):
            yield LintFinding(type=kind, path=path, excerpt=_excerpt(text, m.start(), m.end()),
                              message=f"{path}: {what}")


def hazards(files: Mapping[str, str], *, injection: Sequence[Detector]
            ) -> tuple[LintFinding, ...]:
    return tuple(f for path, text in sorted(files.items())
                 for f in _file_hazards(path, text, injection))
