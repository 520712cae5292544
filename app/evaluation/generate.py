"""``ctxgate eval generate``: a ``facts`` suite with ground-truth evidence, made from the
retrieval benchmark's data (``bench.retrieval_data``: generated from a seed, or read from its
JSONL format, into which a public conversation dataset converts).

Contract: ``facts_suite(data, ...)`` is pure and deterministic (same data and parameters, the
same suite, byte for byte once dumped). One case per user that has questions, so cases stay
independent (each its own tenant) and a case writes only what its questions need besides the
shared knowledge corpus:

1. every document, in batches (``POST /v1/knowledge/documents``, version ``"1"``);
2. the user's earlier sessions in file order, each in one append (so event ``i`` of a session
   is its seq ``i + 1``) unless it exceeds the API's per-call maximum;
3. with sessions, a wait until the server has embedded every event the case's tenant
   appended (``wait_for`` on ``GET /v1/admin/embeddings?tenant_id=``): a turn searches
   other sessions by meaning over exactly those vectors, so without it a paraphrase's recall
   would depend on timing;
4. each question as the first turn of a new session (``session_visibility: all``, a budget),
   with ``expect.relevant`` = its evidence and ``expect.stale`` = superseded answers.

Evidence refs: a session event is ``session://{session_id}/events/{seq}`` (a memory the write
gate made from it counts too: the metrics read a segment's origin); a document passage is the
document, ``kb://{doc_id}`` (any of its chunks: which chunk holds a passage depends on the
server's chunk size, which a configuration may change; the benchmark, which reads the stored
chunks, counts only those holding the quote).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from app.core.refs import doc_ref, event_ref
from app.evaluation.suite import FORMAT, PLATFORM
from bench.retrieval_data import Question, RetrievalSet, Session

DOC_BATCH = 20
EVENTS_MAX = 500  # the API's events per append
KEY = "rt"
EMBEDDED_WAIT_S = 120.0


def _path_id(value: str) -> str:
    """An id as one path segment (the API's ids may hold ``/``)."""
    return quote(value, safe="")


def _documents(data: RetrievalSet) -> list[dict[str, Any]]:
    docs = [{"doc_id": d.doc_id, "version": "1", "title": d.title, "text": d.text,
             "sensitivity": "internal", "trust": "reviewed", "acl": None}
            for d in data.documents]
    return [{"key": KEY, "call": "POST /v1/knowledge/documents",
             "body": {"items": docs[i:i + DOC_BATCH]}} for i in range(0, len(docs), DOC_BATCH)]


def _appends(session: Session) -> list[dict[str, Any]]:
    events = [{"type": "message", "role": role, "content": text}
              for role, text in session.events]
    return [{"key": KEY, "call": f"POST /v1/sessions/{_path_id(session.session_id)}/events",
             "body": {"user_id": session.user_id, "events": events[i:i + EVENTS_MAX]}}
            for i in range(0, len(events), EVENTS_MAX)]


def _refs(q: Question, evidence: tuple[tuple[str, str | int], ...]) -> list[str]:
    if q.kind == "knowledge":
        out = [doc_ref(str(doc_id)) for doc_id, _ in evidence]
    else:
        out = [event_ref(str(sid), int(i) + 1) for sid, i in evidence]
    return list(dict.fromkeys(out))  # one ref per document, in the evidence's order


def _turn(q: Question, budget: int) -> dict[str, Any]:
    expect: dict[str, Any] = {"relevant": _refs(q, q.evidence)}
    if q.stale:
        expect["stale"] = [event_ref(sid, i + 1) for sid, i in q.stale]
    return {"key": KEY, "call": "POST /v1/context",
            "body": {"user_id": q.user_id, "session_id": f"ask-{q.qid}", "query": q.query,
                     "data_level": "internal", "session_visibility": "all",
                     "budget": {"max_tokens": budget}},
            "expect": expect}


def _case_id(user_id: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", user_id).strip("-")[:40] or "user"
    return f"{slug}-{hashlib.sha256(user_id.encode()).hexdigest()[:6]}"


def facts_suite(data: RetrievalSet, *, name: str, version: str, budget: int = 4000, k: int = 5,
                min_recall: float = 0.5, max_freshness_error: float | None = None
                ) -> dict[str, Any]:
    """The suite (a plain mapping, as ``ctxgate-eval/1`` YAML holds it) for ``data``."""
    docs = _documents(data)
    by_user: dict[str, list[Question]] = {}
    for q in data.questions:
        by_user.setdefault(q.user_id, []).append(q)
    cases = []
    for user_id, questions in by_user.items():
        sessions = [s for s in data.sessions if s.user_id == user_id]
        steps = [*docs, *(a for s in sessions for a in _appends(s))]
        if sessions:
            steps.append({"key": PLATFORM,
                          "call": "GET /v1/admin/embeddings?tenant_id={tenant:t}",
                          "wait_for": {"path": "tables.session_events.pending", "equals": 0,
                                       "timeout_s": EMBEDDED_WAIT_S}})
        steps += [_turn(q, budget) for q in questions]
        kinds = sorted({q.kind for q in questions})
        cases.append({
            "id": _case_id(user_id), "set": "facts",
            "story": (f"{user_id}: {len(questions)} questions ({', '.join(kinds)}) over "
                      f"{len(sessions)} earlier sessions and {len(data.documents)} documents; "
                      "each asked as a new session's first turn must find its evidence"),
            "keys": {KEY: {"tenant": "t", "max_session_visibility": "all"}},
            "steps": steps})
    if not cases:
        raise ValueError("the dataset has no questions: a fact set needs at least one")
    thresholds: dict[str, Any] = {"recall_at_k": {"min": min_recall}}
    if max_freshness_error is not None:
        thresholds["freshness_error"] = {"max": max_freshness_error}
    return {"format": FORMAT, "name": name, "version": version, "k": k,
            "thresholds": thresholds, "cases": cases}


def file_digest(path: Path) -> str:
    """The first 12 hex digits of a file's sha256: a JSONL suite's version names its data."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]
