"""Just enough CommonMark to find what Claude Code treats as live text.

Contract: ``scan(text)`` splits a memory file into lines, drops block-level HTML comments
(a line starting, after at most three spaces, with ``<!--``, through the line holding
``-->``; text after ``-->`` on that line is kept; an unclosed comment runs to the end, as
CommonMark's HTML block does) and flags every line of a fenced code block (```` ``` ```` or
``~~~``, closed by the same character at least as long; unclosed runs to the end). Comments
inside fences are code and stay. ``import_tokens(line)`` finds ``@path`` tokens — ``@`` at
the line start or after whitespace, the path running to the next whitespace or backtick —
outside inline code spans (a backtick run closed by a run of the same length on the same
line; code spans do not cross lines here). Callers skip lines flagged as code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$", re.DOTALL)
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*\r?\n?$")
_COMMENT_OPEN = re.compile(r"^ {0,3}<!--")
_IMPORT = re.compile(r"(?<!\S)@([^\s`]+)")
_PATHLIKE = re.compile(r"^[\w.~/-]")
_BACKTICKS = re.compile(r"`+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    text: str  # with its line ending
    code: bool


def _fence_opening(line: str) -> str | None:
    m = _FENCE_OPEN.match(line)
    if m is None:
        return None
    fence, info = m.group(1), m.group(2)
    if fence[0] == "`" and "`" in info:  # ```x``` on one line is an inline code span
        return None
    return fence


def _closes(line: str, fence: str) -> bool:
    m = _FENCE_CLOSE.match(line)
    return m is not None and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)


def _comment_rest(line: str, search_from: int) -> str | None:
    """Text after the closing ``-->`` or None when this line does not close the comment."""
    idx = line.find("-->", search_from)
    return None if idx < 0 else line[idx + 3 :]


def scan(text: str) -> list[Line]:
    """Lines outside block HTML comments, each flagged as inside a fenced block or not."""
    out: list[Line] = []
    fence: str | None = None
    in_comment = False
    for line in text.splitlines(keepends=True):
        if fence is not None:
            out.append(Line(text=line, code=True))
            fence = None if _closes(line, fence) else fence
            continue
        rest: str | None = None
        if in_comment:
            rest = _comment_rest(line, 0)
        elif _COMMENT_OPEN.match(line):
            rest = _comment_rest(line, line.index("<!--") + 4)
        else:
            fence = _fence_opening(line)
            out.append(Line(text=line, code=fence is not None))
            continue
        in_comment = rest is None
        if rest and rest.strip():
            out.append(Line(text=rest, code=False))
    return out


def code_spans(line: str) -> list[tuple[int, int]]:
    """``[start, end)`` of each inline code span on one line."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(line)]
    spans: list[tuple[int, int]] = []
    k = 0
    while k < len(runs):
        start, end = runs[k]
        width = end - start
        close = next((j for j in range(k + 1, len(runs))
                      if runs[j][1] - runs[j][0] == width), None)
        if close is None:
            k += 1
            continue
        spans.append((start, runs[close][1]))
        k = close + 1
    return spans


def import_tokens(line: str) -> list[tuple[int, int, str]]:
    """``(start, end, path)`` of each ``@path`` outside code spans; ``start`` is the ``@``."""
    spans = code_spans(line)
    found: list[tuple[int, int, str]] = []
    for m in _IMPORT.finditer(line):
        if any(s <= m.start() < e for s, e in spans):
            continue
        if _PATHLIKE.match(m.group(1)):
            found.append((m.start(), m.end(), m.group(1)))
    return found


def prose(text: str) -> str:
    """The text outside comments and fenced blocks (what lint reads as rules)."""
    return "".join(line.text for line in scan(text) if not line.code)
