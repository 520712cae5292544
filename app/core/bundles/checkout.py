"""Which files of a repository a runtime's instructions come from (``ctxgate bundles push``).

Contract, from the names the resolvers themselves read (the constants of ``codex``,
``claude_code``, ``hermes`` and ``openclaw``), so that a file the resolver would load from
some ``cwd`` is never left out of a pushed bundle and nothing else is put in:

* ``loads(runtime, path)``: true when ``runtime`` may load the repository file ``path``
  (repo-relative POSIX) from some working directory, judged by the path alone —
  codex: ``AGENTS.override.md``/``AGENTS.md`` in any directory; claude-code: ``CLAUDE.md``,
  ``.claude/CLAUDE.md`` and ``CLAUDE.local.md`` in any directory and ``.claude/rules/**/*.md``
  at the root; hermes: ``.hermes.md``/``HERMES.md``, the AGENTS names, ``CLAUDE.md``/
  ``claude.md``, ``.cursorrules`` in any directory and ``.cursor/rules/*.mdc``; openclaw:
  its workspace files at the root. A path a bundle reads as a global area (``~/...``,
  Claude Code's ``managed/CLAUDE.md``) is never a repository file here (``reserved``).
* ``imports(runtime, path, text)``: the repository paths a loaded file pulls in — Claude
  Code's ``@path`` imports outside code, resolved as its resolver resolves them (imports of
  the user home excluded); nothing for the other runtimes. A caller follows them
  transitively to have every file an import chain may reach.
* ``ROOT_MARKER``: the bundle entry that says the bundle root is the repository root, as
  ``.git`` is in a checkout (Codex's and Hermes's default root marker). Its content is not
  read by any resolver.

Pure: no I/O; ``ValueError`` for an unknown runtime.
"""

from __future__ import annotations

import posixpath

from app.core.bundles import claude_code, codex, hermes, openclaw
from app.core.bundles.markdown import import_tokens, scan
from app.core.bundles.model import RUNTIMES

ROOT_MARKER = ".git/HEAD"
_HOME = "~/"


def reserved(path: str) -> bool:
    """True for a path a bundle reads as a global area rather than a repository file."""
    return path.startswith(_HOME) or path == claude_code.MANAGED


def _name(path: str) -> str:
    return posixpath.basename(path)


def _claude_code(path: str) -> bool:
    name = _name(path)
    if name in ("CLAUDE.md", "CLAUDE.local.md"):
        return True
    return path.startswith(claude_code.RULES_DIR + "/") and path.endswith(".md")


def _hermes(path: str) -> bool:
    names = (*hermes.HERMES_NAMES, *hermes.AGENTS_NAMES, *hermes.CLAUDE_NAMES, ".cursorrules")
    if _name(path) in names:
        return True
    rules = posixpath.dirname(path)
    return (rules == ".cursor/rules" or rules.endswith("/.cursor/rules")) and \
        path.endswith(".mdc")


def loads(runtime: str, path: str) -> bool:
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}")
    if reserved(path):
        return False
    if runtime == "codex":
        return _name(path) in codex.candidate_names(())
    if runtime == "claude-code":
        return _claude_code(path)
    if runtime == "hermes":
        return _hermes(path)
    return path in openclaw.FILES


def imports(runtime: str, path: str, text: str) -> list[str]:
    if runtime != "claude-code":
        return []
    out: list[str] = []
    for line in scan(text):
        if line.code:
            continue
        for _, _, token in import_tokens(line.text):
            target = claude_code.import_target(path, token)
            if target is not None and not reserved(target) and target not in out:
                out.append(target)
    return out
