"""Claude Code rule files: YAML frontmatter ``paths:`` and the globs it holds.

Contract: ``split_frontmatter(text)`` returns ``(paths, body)``. Frontmatter is a first line
``---`` through the next ``---`` line; without a closing line there is none. ``paths`` is
None when the frontmatter has no ``paths:`` key (or there is no frontmatter), else the
globs: a block list (``- glob``), a flow list (``[a, b]``) or one string, which is split on
commas outside braces. An empty list counts as no ``paths:`` (the rule loads at start).
Quotes around items are removed. The body is the text after the closing line.

``matches(globs, files)`` is true when any repo-relative file matches any glob in full:
``**/`` matches zero or more directories, ``**`` elsewhere any characters, ``*`` and ``?``
never cross ``/``, ``[...]``/``[!...]`` are classes, ``{a,b}`` expands (at most
``MAX_EXPANSIONS`` alternatives per glob). A leading ``./`` or ``/`` is ignored on both
sides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_EXPANSIONS = 256
_PATHS_KEY = re.compile(r"^paths\s*:\s*(.*)$")
_BRACES = re.compile(r"\{([^{}]*)\}")


def _unquote(item: str) -> str:
    item = item.strip()
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
        return item[1:-1]
    return item


def _split_commas(value: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in value:
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth <= 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in (_unquote(x) for x in parts) if p]


def _block_list(lines: list[str]) -> list[str]:
    items: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not stripped.startswith("-"):
            break
        item = _unquote(stripped[1:])
        if item:
            items.append(item)
    return items


def _paths(front: list[str]) -> tuple[str, ...] | None:
    for idx, line in enumerate(front):
        m = _PATHS_KEY.match(line.rstrip())
        if m is None:
            continue
        value = m.group(1).strip()
        if value.startswith("[") and value.endswith("]"):
            globs = _split_commas(value[1:-1])
        elif value:
            globs = _split_commas(_unquote(value))
        else:
            globs = _block_list(front[idx + 1 :])
        return tuple(globs) or None
    return None


def split_frontmatter(text: str) -> tuple[tuple[str, ...] | None, str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text
    for idx in range(1, len(lines)):
        if lines[idx].strip() == "---":
            return _paths(lines[1:idx]), "".join(lines[idx + 1 :])
    return None, text


def expand_braces(glob: str) -> list[str]:
    out: list[str] = []
    todo = [glob]
    while todo and len(out) + len(todo) <= MAX_EXPANSIONS:
        current = todo.pop(0)
        m = _BRACES.search(current)
        if m is None:
            out.append(current)
            continue
        head, tail = current[: m.start()], current[m.end() :]
        todo.extend(f"{head}{alt}{tail}" for alt in m.group(1).split(","))
    return out + todo


def _char_class(glob: str, i: int) -> tuple[str, int] | None:
    j = i + 1
    if j < len(glob) and glob[j] in "!^":
        j += 1
    if j < len(glob) and glob[j] == "]":
        j += 1
    end = glob.find("]", j)
    if end < 0:
        return None
    body = glob[i + 1 : end]
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    return "[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]", end + 1


def glob_regex(glob: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**", i):
            slash = glob.startswith("**/", i)
            out.append("(?:.*/)?" if slash else ".*")
            i += 3 if slash else 2
            continue
        ch = glob[i]
        klass = _char_class(glob, i) if ch == "[" else None
        if klass is not None:
            out.append(klass[0])
            i = klass[1]
            continue
        out.append({"*": "[^/]*", "?": "[^/]"}.get(ch, re.escape(ch)))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _clean(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def matches(globs: Iterable[str], files: Iterable[str]) -> bool:
    targets = [_clean(f) for f in files]
    for glob in globs:
        for variant in expand_braces(_clean(glob)):
            pattern = glob_regex(variant)
            if any(pattern.fullmatch(t) for t in targets):
                return True
    return False
