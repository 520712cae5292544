"""Stage 4 — validate a rebuilt view against the committed checkpoint.

Contract: ``validate_compaction(view, checkpoint, pinned=())`` returns a ``CompactionCheck``
with one ``Check`` per rule (stable machine types below), the texts that were missing (the
caller re-commits with them pinned) and the contradictions found. Present means verbatim
somewhere in ``view.text``.

    compaction.goal_present            the goal
    compaction.constraints_verbatim    every constraint task state holds, word for word (the
                                       older found ones, ``constraint_state.held``, ride in
                                       task state's compressible detail instead)
    compaction.pending_approvals_present   every pending approval
    compaction.evidence_refs_present   the ref each verified evidence item cites (the item
                                       itself when it cites none)
    compaction.pinned_present          every pinned text
    compaction.summary_constraints_verbatim   (only with ``in_summary``) every such text
                                       word for word in the summary itself, not only in
                                       the checkpoint the view also carries
    compaction.summary_consistent      no summary sentence contradicts a constraint
    compaction.conclusions_cite_constraints   every accepted decision that depends on a
                                       constraint (``qualify.depends_on``) carries its
                                       ``[constraint:<id>]``, and does so in the view

A summary sentence *contradicts* a constraint when it shares at least
``MIN_SHARED_TERMS`` subject terms with it (``text.content_terms``: fts tokens and CJK bigrams
without qualifier/modal words) and carries no qualifier or negation of its own: it states the
constrained subject as an unqualified conclusion ("channel customers can use the discount"
against "… only before 2026-06-30, channel customers excepted"). The contradicted
constraint is reported missing, so the retry pins it. Details name counts, never content.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.compaction import text as tx
from app.core.compaction.qualify import cited, depends_on
from app.core.compaction.values import CompactionCheck, Contradiction, View
from app.core.constraint_state import held
from app.core.model import Check, Constraint, TaskCheckpoint

MIN_SHARED_TERMS = 3


def contradiction(sentence: str, constraint: str) -> int:
    """Shared subject terms when ``sentence`` drops ``constraint``'s qualifier, else 0."""
    if constraint in sentence or tx.is_qualified(sentence) or not tx.is_qualified(constraint):
        return 0
    shared = len(tx.content_terms(sentence) & tx.content_terms(constraint))
    return shared if shared >= MIN_SHARED_TERMS else 0


def contradictions(summary: str, constraints: Sequence[Constraint]) -> tuple[
        Contradiction, ...]:
    found = []
    for s in tx.sentences(summary):
        for c in constraints:
            shared = contradiction(s, c.text)
            if shared:
                found.append(Contradiction(sentence=s, constraint=c.text, shared_terms=shared))
    return tuple(found)


def _present(type_: str, wanted: Sequence[str], text: str) -> tuple[Check, list[str]]:
    items = [w for w in wanted if w]
    missing = [w for w in items if w not in text]
    detail = f"missing {len(missing)} of {len(items)}" if missing else ""
    return Check(type=type_, ok=not missing, detail=detail), missing


def _evidence_keys(evidence: Sequence[str]) -> list[str]:
    return [m.group() if (m := tx.REF.search(e)) else e for e in evidence]


def uncited(decisions: Sequence[str], constraints: Sequence[Constraint]) -> list[str]:
    """The decisions that depend on a constraint they do not cite."""
    return [d for d in decisions
            if any(c.id and c.id not in cited(d) and depends_on(d, c) for c in constraints)]


def conclusions_check(checkpoint: TaskCheckpoint, text: str) -> Check:
    bad = uncited(checkpoint.accepted_decisions, checkpoint.constraints)
    absent = [d for d in checkpoint.accepted_decisions if cited(d) and d not in text]
    detail = f"{len(bad)} uncited, {len(absent)} not in the view" if bad or absent else ""
    return Check(type="compaction.conclusions_cite_constraints", ok=not (bad or absent),
                 detail=detail)


def validate_compaction(view: View, checkpoint: TaskCheckpoint,
                        pinned: Sequence[str] = (), *,
                        in_summary: Sequence[str] = ()) -> CompactionCheck:
    text = view.text
    results = [
        _present("compaction.goal_present", [checkpoint.goal], text),
        _present("compaction.constraints_verbatim",
                 [c.text for c in held(checkpoint.constraints)[0]], text),
        _present("compaction.pending_approvals_present", checkpoint.pending_approvals, text),
        _present("compaction.evidence_refs_present",
                 _evidence_keys(checkpoint.verified_evidence), text),
        _present("compaction.pinned_present", pinned, text),
    ]
    if in_summary:
        results.append(_present("compaction.summary_constraints_verbatim", in_summary,
                                view.of_kind("summary")))
    found = contradictions(view.of_kind("summary"), checkpoint.constraints)
    consistent = Check(type="compaction.summary_consistent", ok=not found,
                       detail=f"{len(found)} contradiction(s)" if found else "")
    missing = tx.dedupe([m for _, miss in results for m in miss]
                        + [c.constraint for c in found])
    return CompactionCheck(checks=(*(c for c, _ in results), consistent,
                                   conclusions_check(checkpoint, text)), missing=missing,
                           contradictions=found)
