"""Claude Code: CLAUDE.md memory files, ``.claude/rules`` and ``@path`` imports.

Contract:

* Memory files, all concatenated (none overrides another), in this order: managed
  (``managed/CLAUDE.md`` stands for ``/etc/claude-code/CLAUDE.md``), user
  (``~/.claude/CLAUDE.md``), then for each directory from the repo root down to ``cwd``
  its ``CLAUDE.md`` (else its ``.claude/CLAUDE.md``; the other is ``shadowed``) and then
  its ``CLAUDE.local.md`` (layer ``local``).
* Rules (https://code.claude.com/docs/en/memory, "Organize rules with .claude/rules/"):
  user-level rules are ``~/.claude/rules/**/*.md`` in the bundle (the ``~/`` prefix stands
  for the user's home, as for ``~/.claude/CLAUDE.md``), project rules every
  ``.claude/rules/**/*.md`` at the repo root, each set by path. Rules without ``paths:``
  frontmatter load at launch with the priority of the memory file of their scope, so user
  rules follow ``~/.claude/CLAUDE.md`` and project rules follow the project's memory files
  ("user-level rules are loaded before project rules"). Rules with ``paths:`` load only
  when a file the runtime has in play (``options.files_in_play``, repo-relative; the
  request's ``workspace.files``) matches a glob (see ``rules``); they come last, user
  before project, else they are skipped ``paths not matched``. The frontmatter block never
  reaches the text.
* Each file: block HTML comments are stripped outside code (see ``markdown``), then every
  ``@path`` outside fenced blocks and inline code is replaced in place by the imported
  file, processed the same way and trimmed. ``@~/x`` is the user home; other paths are
  relative to the importing file's directory. An import ``options.max_import_depth`` + 1
  hops from its memory file (default 5, the documented "maximum depth of five hops": the
  6th hop), an import of a file already on the
  current import chain (a cycle), and an import of a path that is not a file in the bundle
  stay as written and are recorded ``max import depth``, ``import cycle`` or ``unresolved
  import`` with the importing file as ``source``. Imported files are ``import`` entries.
* Text: each file's processed text, trimmed, joined with ``"\\n\\n"``; blank files are
  skipped ``empty``. No headers are emitted; nothing is truncated. ``session_type`` does
  not change loading.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from app.core.bundles.common import Bundle, Trace, chain_down, join
from app.core.bundles.markdown import import_tokens, scan
from app.core.bundles.model import Resolution, ResolveOptions
from app.core.bundles.rules import matches, split_frontmatter

MANAGED = "managed/CLAUDE.md"
USER = "~/.claude/CLAUDE.md"
RULES_DIR = ".claude/rules"
USER_RULES_DIR = "~/.claude/rules"


@dataclass(slots=True)
class _Ctx:
    bundle: Bundle
    max_depth: int
    trace: Trace


def memory_files(bundle: Bundle, cwd: str, trace: Trace) -> list[tuple[str, str]]:
    """``(path, layer)`` of every memory file, in load order."""
    out = [(p, layer) for p, layer in ((MANAGED, "managed"), (USER, "user"))
           if bundle.is_file(p)]
    for directory in chain_down("", cwd):
        main, alt = join(directory, "CLAUDE.md"), join(directory, ".claude/CLAUDE.md")
        if bundle.is_file(main):
            out.append((main, "project"))
            if bundle.is_file(alt):
                trace.skip(alt, "shadowed")
        elif bundle.is_file(alt):
            out.append((alt, "project"))
        local = join(directory, "CLAUDE.local.md")
        if bundle.is_file(local):
            out.append((local, "local"))
    return out


def import_target(source: str, token: str) -> str | None:
    """The bundle path ``@token`` names from ``source``, or None if it cannot be one."""
    if token.startswith("/"):
        return None
    path = token if token.startswith("~/") else posixpath.join(
        posixpath.dirname(source), token)
    norm = posixpath.normpath(path)
    return None if norm in ("..", ".") or norm.startswith("../") else norm


def _import(ctx: _Ctx, source: str, token: str, stack: tuple[str, ...]) -> str | None:
    """The expanded text of one import, or None to leave the token as written."""
    target = import_target(source, token)
    label = target or token
    if len(stack) > ctx.max_depth:
        ctx.trace.skip(label, "max import depth", source)
        return None
    if target in stack:
        ctx.trace.skip(label, "import cycle", source)
        return None
    if target is None or not ctx.bundle.is_file(target):
        ctx.trace.skip(label, "unresolved import", source)
        return None
    content = ctx.bundle.text(target)
    own = "".join(line.text for line in scan(content)).strip()
    if not own:
        ctx.trace.skip(target, "empty", source)
        return ""
    ctx.trace.add(target, "import", content, own)
    return _render(ctx, target, content, (*stack, target)).strip()


def _expand_line(ctx: _Ctx, path: str, line: str, stack: tuple[str, ...]) -> str:
    pieces: list[str] = []
    pos = 0
    for start, end, token in import_tokens(line):
        expanded = _import(ctx, path, token, stack)
        pieces.append(line[pos:start])
        pieces.append(line[start:end] if expanded is None else expanded)
        pos = end
    pieces.append(line[pos:])
    return "".join(pieces)


def _render(ctx: _Ctx, path: str, text: str, stack: tuple[str, ...]) -> str:
    return "".join(line.text if line.code else _expand_line(ctx, path, line.text, stack)
                   for line in scan(text))


def _load(ctx: _Ctx, path: str, layer: str, body: str) -> str:
    """One memory or rule file's final text ("" when blank)."""
    own = "".join(line.text for line in scan(body)).strip()
    if not own:
        ctx.trace.skip(path, "empty")
        return ""
    ctx.trace.add(path, layer, ctx.bundle.text(path), own)
    return _render(ctx, path, body, (path,)).strip()


def rule_files(bundle: Bundle, rules_dir: str, files_in_play: tuple[str, ...],
               trace: Trace) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(path, body)`` of the rules under ``rules_dir`` that load: (unconditional ones,
    path-scoped ones matched by a file in play)."""
    always: list[tuple[str, str]] = []
    matched: list[tuple[str, str]] = []
    for path in bundle.under(rules_dir):
        if not path.endswith(".md"):
            continue
        globs, body = split_frontmatter(bundle.text(path))
        if globs is None:
            always.append((path, body))
        elif matches(globs, files_in_play):
            matched.append((path, body))
        else:
            trace.skip(path, "paths not matched")
    return always, matched


def resolve(bundle: Bundle, cwd: str, options: ResolveOptions) -> Resolution:
    ctx = _Ctx(bundle=bundle, max_depth=options.max_import_depth, trace=Trace())
    memory = memory_files(bundle, cwd, ctx.trace)
    user_always, user_matched = rule_files(bundle, USER_RULES_DIR, options.files_in_play,
                                           ctx.trace)
    always, matched = rule_files(bundle, RULES_DIR, options.files_in_play, ctx.trace)
    user_end = sum(1 for _, layer in memory if layer in ("managed", "user"))
    loads = [(p, layer, bundle.text(p)) for p, layer in memory[:user_end]]
    loads += [(p, "rule", body) for p, body in user_always]
    loads += [(p, layer, bundle.text(p)) for p, layer in memory[user_end:]]
    loads += [(p, "rule", body) for p, body in always + user_matched + matched]
    sections = [_load(ctx, p, layer, body) for p, layer, body in loads]
    return ctx.trace.resolution("\n\n".join(s for s in sections if s))
