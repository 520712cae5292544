from __future__ import annotations

from app.core.candidates import checkpoint_core_text, checkpoint_detail_text
from app.core.compile import compile_envelope
from app.core.constraint_state import HELD_FOUND, held
from app.core.model import Constraint, Envelope
from app.core.validate import CHECK_TYPES, validate
from tests.unit.builders import DISCOUNT, cand, checkpoint, count


def env(*contents: str) -> Envelope:
    return compile_envelope([cand(f"kb://{i}", t) for i, t in enumerate(contents)],
                            count_tokens=count)


FULL = ("Goal: Refund order 991 to the original card\n"
        f"- [only] {DISCOUNT}\n- finance lead approves refunds above 500 EUR",
        "evidence: gateway log shows timeout after 30s")


def test_no_checkpoint_passes_every_check() -> None:
    result = validate(env(), checkpoint=None)
    assert result.ok
    assert [c.type for c in result.checks] == list(CHECK_TYPES)
    assert result.missing == ()


def test_all_present_across_segments() -> None:
    result = validate(env(*FULL), checkpoint=checkpoint())
    assert result.ok
    assert all(c.ok and c.detail == "" for c in result.checks)


def test_constraints_must_be_verbatim() -> None:
    paraphrase = FULL[0].replace(DISCOUNT, "only before end of June, except channel customers")
    result = validate(env(paraphrase, FULL[1]), checkpoint=checkpoint())
    assert not result.ok
    bad = {c.type: c for c in result.checks if not c.ok}
    assert list(bad) == ["validate.constraints_verbatim"]
    assert bad["validate.constraints_verbatim"].detail == "missing 1 of 1: #1"
    assert result.missing_required == (DISCOUNT,)
    assert result.missing_soft == ()


def test_missing_goal_approvals_and_evidence_are_reported_without_content() -> None:
    cp = checkpoint(constraints=(Constraint(text="limit 3 retries", kind="limit"),
                                 Constraint(text=DISCOUNT, kind="only")))
    result = validate(env(f"{DISCOUNT}"), checkpoint=cp)
    failed = [c for c in result.checks if not c.ok]
    assert [c.type for c in failed] == list(CHECK_TYPES)
    assert failed[2].detail == "missing 1 of 2: #1"
    assert all("refund" not in c.detail.lower() for c in failed)
    assert result.missing_required == (cp.goal, *cp.pending_approvals, "limit 3 retries")
    assert result.missing_soft == cp.verified_evidence
    assert result.missing == (*result.missing_required, *result.missing_soft)


def test_empty_texts_are_not_required() -> None:
    cp = checkpoint(goal="", pending_approvals=(), constraints=(), verified_evidence=())
    assert validate(env(), checkpoint=cp).ok


def test_task_state_holds_api_constraints_and_the_newest_found_ones() -> None:
    found = [Constraint(text=f"refunds over {i}00 EUR only with approval", kind="only",
                        origin="tool", source_ref=f"session://s/events/{i}")
             for i in range(HELD_FOUND + 3)]
    cp = checkpoint(constraints=(Constraint(text=DISCOUNT, kind="only"), *found))
    kept, older = held(cp.constraints)
    assert kept == (cp.constraints[0], *found[3:])  # given through the API: always held
    assert older == tuple(found[:3])
    core, detail = checkpoint_core_text(cp), checkpoint_detail_text(cp)
    assert all(c.text in core for c in kept) and not any(c.text in core for c in older)
    assert all(c.text in detail for c in older)
    # Held ones are required; older found ones are soft: pinned when they fit, never a 422.
    result = validate(env(core, *FULL), checkpoint=cp)
    assert result.missing_required == ()
    assert result.missing_soft == tuple(c.text for c in older)
