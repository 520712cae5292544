"""Lint of a resolved bundle: what the rule files cannot do or say consistently.

Contract: ``lint(runtime, files, resolution)`` returns findings in a stable order, each with
a machine ``type``:

* ``lint.unresolved_import`` / ``lint.import_cycle`` / ``lint.max_import_depth`` — one per
  skipped import record; ``path`` is the importing file, ``other_path`` the target.
* ``lint.over_budget`` — a resolved file that was truncated, or a file skipped
  ``budget exhausted``.
* ``lint.non_enforceable_permission`` — a sentence that grants or denies an action
  ("you may read .env", "never delete production data", "禁止删除…"): Markdown cannot
  enforce it; the permission belongs in the runtime's settings. At most
  ``MAX_PER_FILE`` per file.
* ``lint.conflict`` — two resolved files with sentences about the same subject (at least
  ``MIN_SHARED_TERMS`` shared content terms) of opposite polarity (one negated: never,
  do not, must not, 禁止…; the other affirmative: always, must, 必须…). One finding per
  file pair, ``path`` the earlier file in load order, at most ``MAX_CONFLICTS``.

Rule text is each file's prose (HTML comments and fenced code removed), cut into at most
``MAX_SENTENCES`` sentences. Secrets are not looked for here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import combinations

from app.core.bundles.common import Bundle
from app.core.bundles.markdown import prose
from app.core.bundles.model import RUNTIMES, Resolution

MIN_SHARED_TERMS = 3
MAX_SENTENCES = 200
MAX_PER_FILE = 20
MAX_CONFLICTS = 20
EXCERPT_CHARS = 200
IMPORT_FINDINGS = {"unresolved import": "lint.unresolved_import",
                   "import cycle": "lint.import_cycle",
                   "max import depth": "lint.max_import_depth"}

_SENTENCE = re.compile(r"[^.!?。！？；;\n]+")
_VERBS = (r"(?:read|write|edit|modify|delete|remove|push|force-push|deploy|run|execute|"
          r"access|commit|merge|install|drop|publish|release|upload|overwrite|rebase)")
_GRANT = (r"(?:you\s+(?:may|can|are\s+(?:allowed|permitted)\s+to)|allowed\s+to|"
          r"permitted\s+to|feel\s+free\s+to)")
_DENY = (r"(?:never|do\s+not|don't|must\s+not|mustn't|may\s+not|cannot|can't|"
         r"should\s+not|shouldn't|forbidden\s+to)")
_PERMISSION = re.compile(
    rf"\b(?:{_GRANT}|{_DENY})\s+(?:(?:ever|also|always|freely)\s+)?{_VERBS}\b|"
    r"(?:可以|允许|准许|禁止|不得|不要|不能|不准|严禁|不许)\s*"
    r"(?:读取|读|写入|写|修改|编辑|删除|推送|部署|执行|运行|访问|提交|合并|安装|发布|上传)",
    re.IGNORECASE)
_NEGATIVE = re.compile(
    r"\b(?:never|not|no|don't|mustn't|cannot|can't|shouldn't|avoid|forbidden)\b|"
    r"禁止|不得|不要|不能|严禁|不准|不许|切勿", re.IGNORECASE)
_POSITIVE = re.compile(r"\b(?:always|must|should|required|ensure)\b|必须|总是|务必|始终",
                       re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9][a-z0-9_./-]*")
_CJK = re.compile(r"[\u4e00-\u9fff]+")
_STOP = frozenset((
    "a", "an", "and", "or", "the", "to", "of", "in", "on", "for", "with", "is", "are", "be",
    "been", "this", "that", "these", "those", "it", "its", "you", "your", "we", "our", "us",
    "they", "them", "any", "all", "when", "before", "after", "from", "by", "as", "at", "if",
    "then", "than", "into", "not", "no", "never", "always", "must", "should", "do", "does", "can",
    "cannot", "may", "might", "will", "would", "avoid", "ensure", "required", "forbidden",
))


@dataclass(frozen=True, slots=True, kw_only=True)
class LintFinding:
    type: str
    path: str
    message: str
    other_path: str = ""
    excerpt: str = ""


def _excerpt(text: str) -> str:
    return " ".join(text.split())[:EXCERPT_CHARS]


def sentences(text: str) -> list[str]:
    found = (m.group(0).strip() for m in _SENTENCE.finditer(prose(text)))
    return [s for s in found if s][:MAX_SENTENCES]


def polarity(sentence: str) -> int:
    """-1 negated, +1 affirmative rule, 0 neither."""
    if _NEGATIVE.search(sentence):
        return -1
    return 1 if _POSITIVE.search(sentence) else 0


def terms(sentence: str) -> frozenset[str]:
    """Content terms: lower-cased words outside the stop list, plus CJK bigrams."""
    lowered = _POSITIVE.sub(" ", _NEGATIVE.sub(" ", sentence.lower()))
    words = {w.rstrip("./-") for w in _WORD.findall(lowered)}
    bigrams = {run[i : i + 2] for run in _CJK.findall(lowered) for i in range(len(run) - 1)}
    return frozenset(w for w in words | bigrams if len(w) >= 2 and w not in _STOP)


def _rule_texts(files: Mapping[str, str], resolution: Resolution) -> list[tuple[str, str]]:
    bundle = Bundle.of(files)
    seen: dict[str, str] = {}
    for entry in resolution.resolved_order:
        if entry.reason != "missing" and bundle.is_file(entry.path):
            seen.setdefault(entry.path, bundle.text(entry.path))
    return list(seen.items())


def _record_findings(resolution: Resolution) -> Iterator[LintFinding]:
    for skip in resolution.skipped:
        kind = IMPORT_FINDINGS.get(skip.reason)
        if kind is not None:
            yield LintFinding(type=kind, path=skip.source, other_path=skip.path,
                              message=f"{skip.source}: {skip.reason} @{skip.path}")
        elif skip.reason == "budget exhausted":
            yield LintFinding(type="lint.over_budget", path=skip.path,
                              message=f"{skip.path} was not loaded: budget exhausted")
    for entry in resolution.resolved_order:
        if entry.truncated:
            yield LintFinding(type="lint.over_budget", path=entry.path,
                              message=f"{entry.path} truncated: {entry.bytes_used} of "
                                      f"{entry.bytes_in} bytes used")


def _permission_findings(texts: list[tuple[str, str]]) -> Iterator[LintFinding]:
    for path, text in texts:
        hits = [s for s in sentences(text) if _PERMISSION.search(s)][:MAX_PER_FILE]
        for sentence in hits:
            yield LintFinding(type="lint.non_enforceable_permission", path=path,
                              excerpt=_excerpt(sentence),
                              message=f"{path}: a permission in Markdown is not enforced; "
                                      "set it in the runtime's permission settings")


def _conflict(a: list[str], b: list[str]) -> tuple[str, str] | None:
    for left in a:
        p_left = polarity(left)
        if p_left == 0:
            continue
        for right in b:
            shared = terms(left) & terms(right)
            if polarity(right) == -p_left and len(shared) >= MIN_SHARED_TERMS:
                return left, right
    return None


def _conflict_findings(texts: list[tuple[str, str]]) -> Iterator[LintFinding]:
    split = [(path, sentences(text)) for path, text in texts]
    count = 0
    for (path_a, sent_a), (path_b, sent_b) in combinations(split, 2):
        pair = _conflict(sent_a, sent_b)
        if pair is None or count >= MAX_CONFLICTS:
            continue
        count += 1
        yield LintFinding(type="lint.conflict", path=path_a, other_path=path_b,
                          excerpt=_excerpt(f"{pair[0]} | {pair[1]}"),
                          message=f"{path_a} and {path_b} give opposite rules on the "
                                  "same subject")


def lint(runtime: str, files: Mapping[str, str],
         resolution: Resolution) -> tuple[LintFinding, ...]:
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}")
    texts = _rule_texts(files, resolution)
    return (*_record_findings(resolution), *_permission_findings(texts),
            *_conflict_findings(texts))
