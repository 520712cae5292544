"""The handles (``ref``) segments and manifests cite, built and parsed in one place.

Shapes (each ``{…}`` one segment, escaped by ``app.core.ids.escape_segment``, so it holds no
``/ # @ :`` and a ref splits back into exactly the ids it was built from):

- ``kb://{doc_id}`` (a document), ``kb://{doc_id}#v{version}:c{chunk_no}`` (one chunk)
- ``session://{session_id}``, ``session://{session_id}/events/{seq}``,
  ``session://{session_id}/compaction/{compaction_id}``, ``session://{session_id}/summary``
- ``task://{task_id}``, ``task://{task_id}/checkpoint/{revision}[#{part}]``
- ``mem://{memory_id}@v{version}``, ``bundle://{bundle_id}@{revision}``

Plain ids (``[A-Za-z0-9._~-]``) are not changed by escaping, so their refs read as written.
"""

from __future__ import annotations

import re

from app.core.ids import escape_segment as esc
from app.core.ids import unescape_segment

_SEPARATORS = re.compile(r"[/#@:]")


def doc_ref(doc_id: str) -> str:
    return f"kb://{esc(doc_id)}"


def chunk_ref(doc_id: str, version: str, chunk_no: int) -> str:
    return f"kb://{esc(doc_id)}#v{esc(version)}:c{chunk_no}"


def session_ref(session_id: str) -> str:
    return f"session://{esc(session_id)}"


def event_ref(session_id: str, seq: int) -> str:
    """The archive handle of one event: the view and the checkpoint cite it."""
    return f"{session_ref(session_id)}/events/{seq}"


def session_events_pattern(session_id: str) -> str:
    """How a compaction block names every event of the session (``{seq}`` literally)."""
    return f"{session_ref(session_id)}/events/{{seq}}"


def compaction_ref(session_id: str, compaction_id: str) -> str:
    return f"{session_ref(session_id)}/compaction/{esc(compaction_id)}"


def summary_ref(session_id: str) -> str:
    return f"{session_ref(session_id)}/summary"


def task_ref(task_id: str) -> str:
    return f"task://{esc(task_id)}"


def checkpoint_ref(task_id: str, revision: int, part: str | None = None) -> str:
    ref = f"{task_ref(task_id)}/checkpoint/{revision}"
    return ref if part is None else f"{ref}#{esc(part)}"


def memory_ref(memory_id: str, version: int) -> str:
    return f"mem://{esc(memory_id)}@v{version}"


def bundle_ref(bundle_id: str, revision: str) -> str:
    return f"bundle://{esc(bundle_id)}@{esc(revision)}"


def parse_ref(ref: str) -> tuple[str, tuple[str, ...]]:
    """``(scheme, segments)`` of a ref built here, each segment unescaped (a literal marker
    such as ``events`` or ``v1`` comes back as written). ``ValueError`` if ``ref`` has no
    scheme."""
    scheme, sep, rest = ref.partition("://")
    if not sep or not scheme:
        raise ValueError(f"not a ref: {ref!r}")
    return scheme, tuple(unescape_segment(s) for s in _SEPARATORS.split(rest))


def event_seq(ref: str) -> int | None:
    """The sequence number of an event ref (``event_ref``), None for any other ref."""
    try:
        scheme, parts = parse_ref(ref)
    except ValueError:
        return None
    if (scheme == "session" and len(parts) == 3 and parts[1] == "events"
            and parts[2].isascii() and parts[2].isdigit()):
        return int(parts[2])
    return None
