"""Constraints from every source (issue 17, item 1), pure: which sentences constrain (a
labelled set, English and Chinese, with its precision and recall), their dates and expiry,
the links from conclusions, the commit from tool results and retrieved sources, validation,
and the read-back planner."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.core.compaction import RuleExtractor, commit
from app.core.compaction.check import uncited, validate_compaction
from app.core.compaction.extract import Source
from app.core.compaction.qualify import (
    cited,
    constraint,
    constraint_id,
    constraint_kind,
    depends_on,
    link,
    parse_date,
    with_id,
)
from app.core.compaction.values import View, ViewItem
from app.core.constraint_state import constraint_line, status
from app.core.model import Constraint, SessionEvent, TaskCheckpoint, TranscriptHit
from app.core.readback import (
    APPROVAL_REACTIVATED,
    CITED_CONCLUSION,
    MAX_READ_BACK,
    MISSING_EVIDENCE,
    ReadBack,
    missing_evidence,
    plan,
    reactivated,
    readable,
)
from app.core.readback import (
    cited as cited_events,
)

CLAUSE_ZH = "合同第 7.2 条：该折扣仅限 2026-06-30 前下单、渠道客户除外。"
NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)

# (sentence, constrains?) — written for this test, not taken from any corpus.
LABELLED: tuple[tuple[str, bool], ...] = (
    # English constraints
    ("The discount applies only to orders placed before June 30, 2026.", True),
    ("Channel customers are excluded from this offer.", True),
    ("Refunds are capped at 500 USD per order.", True),
    ("At most 2 hosts per hour may be restarted.", True),
    ("The rebate is valid until 2026-09-30 for direct customers.", True),
    ("Deploy only after the SRE sign-off.", True),
    ("No more than three retries are allowed.", True),
    ("The deadline for the migration is 2026-03-01.", True),
    ("Payments must first be approved by finance.", True),
    ("This price holds unless the order exceeds 1000 units.", True),
    ("Only enterprise customers may use the SSO connector.", True),
    ("Invoices are limited to 30 days of payment terms.", True),
    ("The offer applies to new accounts only, except resellers.", True),
    ("Submit the form by 6/30/2026.", False),  # no qualifier word: a plain instruction
    # English non-constraints
    ("It's the only way I know to reproduce the bug.", False),
    ("I only have a minute before the meeting.", False),
    ("Before we start, let me check the logs.", False),
    ("Only the first test ran.", False),
    ("We only saw this once in staging.", False),
    ("Not only is it slow, it also leaks memory.", False),
    ("Can channel customers use the discount?", False),
    ("The report was generated before lunch.", False),
    ("Thanks, that is the only thing I needed.", False),
    ("Before that, the service ran fine.", False),
    # Chinese constraints
    (CLAUSE_ZH, True),
    ("退款金额不得超过订单金额的 50%。", True),
    ("每小时最多重启 2 台主机。", True),
    ("渠道客户不包括在本次活动范围内。", True),
    ("上线前须先获得财务审批。", True),
    ("该优惠仅限新客户使用。", True),
    ("报名截止 2026年6月30日。", True),
    ("本条款只适用于直销订单。", True),
    ("折扣上限为 20%。", True),
    ("前提是客户已签署框架协议。", True),
    # Chinese non-constraints
    ("我只是问一下进度。", False),
    ("之前我们讨论过这个问题。", False),
    ("渠道客户可以用这个折扣吗？", False),
    ("只好先重启服务再看日志。", False),
    ("这个问题之前出现过一次。", False),
    ("附件 3 的付款条款已核对，没有发现问题。", False),
)


# Written after the rules were tuned on LABELLED and never tuned on: the honest measure.
HELD_OUT: tuple[tuple[str, bool], ...] = (
    ("Free shipping is available only within the EU.", True),
    ("Access is restricted to members of the finance group.", False),
    ("The warranty covers parts but not labor, except for the first 90 days.", True),
    ("Employees may expense at most two meals per day.", True),
    ("Orders must be placed no later than March 31, 2027.", True),
    ("The license is limited to one production server.", True),
    ("Discounts cannot be combined unless approved by the account manager.", True),
    ("Only Python 3.11 is supported in this release.", True),
    ("The API accepts up to 100 items per batch.", True),
    ("The pilot requires manager approval before enrollment.", True),
    ("I was only joking about the deadline.", False),
    ("Let's grab lunch before the review.", False),
    ("He only reads the summary.", False),
    ("Is the discount limited to new customers?", False),
    ("The only failing test is test_refund_timeout.", False),
    ("We met the deadline last sprint.", False),
    ("该价格仅适用于年度合同。", True),
    ("试用期内最多创建 3 个项目。", True),
    ("海外订单除外。", True),
    ("须先完成实名认证才能提现。", True),
    ("每人限购两件。", True),
    ("他只说了一句话就走了。", False),
    ("之前的版本没有这个问题。", False),
    ("我们只剩最后一个问题了。", False),
    ("会议在下班前结束了。", False),
    ("上限是多少？", False),
)


def _measure(name: str, labelled: tuple[tuple[str, bool], ...]) -> tuple[float, float]:
    tp = sum(1 for s, want in labelled if want and constraint_kind(s))
    fp = [s for s, want in labelled if not want and constraint_kind(s)]
    fn = [s for s, want in labelled if want and not constraint_kind(s)]
    precision, recall = tp / (tp + len(fp)), tp / (tp + len(fn))
    print(f"constraint extraction, {name} ({len(labelled)} sentences): "
          f"precision {precision:.2f}, recall {recall:.2f}; fp={fp}, fn={fn}")
    return precision, recall


def test_labelled_precision_and_recall() -> None:
    """Measured: tuned set 1.00 / 1.00 (the rules were tuned on it); held-out 0.86 / 0.86
    (fp: two sentences that mention a "deadline" as a noun; fn: "Only X is supported" and
    限购, which no rule names)."""
    precision, recall = _measure("tuned set", LABELLED)
    assert precision >= 0.9 and recall >= 0.9
    precision, recall = _measure("held-out", HELD_OUT)
    assert precision >= 0.8 and recall >= 0.8


@pytest.mark.parametrize(("text", "want"), [
    ("该折扣仅限 2026-06-30 前下单", "2026-06-30"),
    ("orders before June 30, 2026 only", "2026-06-30"),
    ("orders before 30 June 2026 only", "2026-06-30"),
    ("valid until Jun. 30 2026", "2026-06-30"),
    ("2026年6月30日前下单", "2026-06-30"),
    ("by 6/30/2026", "2026-06-30"),
    ("by 30/6/2026", "2026-06-30"),
    ("2026/06/30 截止", "2026-06-30"),
    ("before 2026-02-30", None),  # not a real date
    ("before the end of next quarter", None),
])
def test_parse_date(text: str, want: str | None) -> None:
    got = parse_date(text)
    assert (got.isoformat() if got else None) == want


def test_a_deadline_gets_its_date_and_expiry_and_expires_at_now() -> None:
    c = constraint(CLAUSE_ZH, "except", source_ref="session://s/events/2", origin="tool")
    assert c.due == "2026-06-30" and c.expires_at == "2026-07-01T00:00:00+00:00"
    assert c.id == constraint_id(CLAUSE_ZH) and not c.flags
    assert status(c, datetime(2026, 6, 30, 23, tzinfo=UTC)) == "active"
    assert status(c, NOW) == "reconfirm"
    line = constraint_line(c, NOW)
    assert CLAUSE_ZH in line and f"constraint:{c.id}" in line and "EXPIRED" in line
    assert "(from tool: session://s/events/2)" in line


def test_an_unparseable_deadline_is_kept_and_flagged() -> None:
    text = "The rebate applies only to orders placed before the end of next quarter."
    kind = constraint_kind(text)
    assert kind == "deadline"
    c = constraint(text, kind, source_ref=None)
    assert c.text == text and c.due is None and c.flags == ("date_unparsed",)
    assert status(c, NOW) == "date_unparsed"
    assert "date not understood" in constraint_line(c, NOW)


def test_with_id_fills_an_api_constraint() -> None:
    c = with_id(Constraint(text=CLAUSE_ZH, kind="only"))
    assert c.id == constraint_id(CLAUSE_ZH) and c.due == "2026-06-30" and c.kind == "only"


def test_link_and_depends_on() -> None:
    c = constraint(CLAUSE_ZH, "except", source_ref=None)
    decision = "决定：渠道客户不适用第 7.2 条折扣，直销客户按合同报价。"
    assert depends_on(decision, c)
    linked = link(decision, [c])
    assert linked == f"{decision} [constraint:{c.id}]" and cited(linked) == {c.id}
    assert link(linked, [c]) == linked  # idempotent
    assert not depends_on("决定采用直销报价模板。", c)
    # numbers alone (7.2) do not tie an unrelated sentence to the clause
    assert not depends_on("We decided to ship release 7.2 on Monday.", c)


def _ev(seq: int, type_: str, content: str = "", **kw: object) -> SessionEvent:
    return SessionEvent(seq=seq, type=type_, content=content, **kw)  # type: ignore[arg-type]


def _contract_session() -> list[SessionEvent]:
    return [
        _ev(0, "message", "审阅经销合同并答复销售的折扣问题。", role="user"),
        _ev(1, "tool_call", call_id="c1", name="read_contract", arguments={"doc": "dist"}),
        _ev(2, "tool_result", "第 7 章 价格。" + CLAUSE_ZH + "7.3 付款期限 30 天。",
            call_id="c1", name="read_contract"),
        _ev(3, "message", "决定：渠道客户不适用第 7.2 条折扣，直销客户按合同报价。",
            role="assistant"),
    ]


def test_commit_takes_a_tool_results_clause_and_links_the_decision() -> None:
    cp = commit(_contract_session(), None, extractor=RuleExtractor(), session_id="s",
                task_id="t", user_id="u", now=NOW)
    [c] = [c for c in cp.constraints if "渠道客户除外" in c.text]
    assert c.origin == "tool" and c.source_ref == "session://s/events/2"
    assert c.due == "2026-06-30" and c.kind == "except"
    [d] = cp.accepted_decisions
    assert f"[constraint:{c.id}]" in d
    # expired at NOW: asked about, not dropped
    assert any(q.startswith("Re-confirm: expired 2026-06-30") for q in cp.open_questions)
    assert not uncited(cp.accepted_decisions, cp.constraints)
    # a later commit links an old decision to a constraint that arrives after it
    old = TaskCheckpoint(task_id="t", revision=1, user_id="u", session_id="s",
                         parent_task_id=None, goal="g",
                         accepted_decisions=("We decided: channel customers never get the "
                                             "discount of clause 7.2.",))
    src = Source(ref="kb://contract#v1:c3",
                 text="Clause 7.2. The discount applies only before 2026-06-30, channel "
                      "customers excepted.")
    new = commit((), old, extractor=RuleExtractor(), session_id="s", sources=[src], now=NOW)
    [k] = new.constraints
    assert k.origin == "knowledge" and k.source_ref == "kb://contract#v1:c3"
    assert new.accepted_decisions[0].endswith(f"[constraint:{k.id}]")
    assert new.revision == 2 and new.goal == "g"


def test_commit_never_drops_and_dedupes_by_text() -> None:
    first = commit(_contract_session(), None, extractor=RuleExtractor(), session_id="s")
    again = commit(_contract_session(), first, extractor=RuleExtractor(), session_id="s")
    assert again.constraints == first.constraints
    assert again.accepted_decisions == first.accepted_decisions


def test_validation_asserts_constraints_verbatim_and_cited_conclusions() -> None:
    cp = commit(_contract_session(), None, extractor=RuleExtractor(), session_id="s",
                task_id="t", user_id="u")
    c = next(c for c in cp.constraints if "渠道客户除外" in c.text)
    full = "\n".join([cp.goal, *(x.text for x in cp.constraints), *cp.accepted_decisions])
    ok = validate_compaction(View(items=(ViewItem(kind="checkpoint", ref="r", content=full),)),
                             cp)
    checks = {x.type: x.ok for x in ok.checks}
    assert checks["compaction.constraints_verbatim"]
    assert checks["compaction.conclusions_cite_constraints"]
    unlinked = TaskCheckpoint(task_id="t", revision=1, user_id="u", session_id="s",
                              parent_task_id=None, goal=cp.goal, constraints=(c,),
                              accepted_decisions=("决定：渠道客户不适用第 7.2 条折扣。",))
    text = "\n".join([cp.goal, c.text, *unlinked.accepted_decisions])
    bad = validate_compaction(View(items=(ViewItem(kind="checkpoint", ref="r", content=text),)),
                              unlinked)
    assert {x.type: x.ok for x in bad.checks}["compaction.conclusions_cite_constraints"] is False
    lost = validate_compaction(View(items=(ViewItem(kind="summary", ref="r",
                                                    content=cp.goal),)), cp)
    assert c.text in lost.missing


def test_readback_plans() -> None:
    c = constraint(CLAUSE_ZH, "except", source_ref="session://s/events/2")
    k = constraint("Refunds are capped at 500 USD.", "limit", source_ref="kb://d#v1:c0")
    cp = TaskCheckpoint(task_id="t", revision=1, user_id="u", session_id="s",
                        parent_task_id=None, goal="g", constraints=(c, k),
                        verified_evidence=("RefundIT passed [session://s/events/9]",),
                        pending_approvals=("Deploying the pricing change to production "
                                           "needs approval from finance.",))
    got = missing_evidence(cp, present={"session://s/events/9"})
    assert got == [ReadBack(reason=MISSING_EVIDENCE, ref="session://s/events/2"),
                   ReadBack(reason=MISSING_EVIDENCE, ref="kb://d#v1:c0")]
    assert missing_evidence(None, set()) == []
    assert readable("kb://d#v1:c0") and not readable("kb://d") and not readable("task://t")
    # (c) a pending approval taken up again
    assert reactivated("Finance approved the pricing change for production, proceed.",
                       cp.pending_approvals) == list(cp.pending_approvals)
    assert reactivated("What is the pricing change?", cp.pending_approvals) == []
    # (b) the user cites a conclusion outside the window
    hit = TranscriptHit(session_id="s", event=_ev(
        40, "message", "附件 3 的付款期限为 33 天，已核对。", role="assistant"), rank=1)
    refs = {40: "session://s/events/40"}
    assert cited_events("你之前说附件 3 的付款期限是多少天？", [hit], set(),
                        session_ref_of=refs) == [ReadBack(reason=CITED_CONCLUSION,
                                                          ref="session://s/events/40")]
    assert cited_events("你之前说附件 3 的付款期限是多少天？", [hit], {"session://s/events/40"},
                        session_ref_of=refs) == []
    assert cited_events("天气怎么样？", [hit], set(), session_ref_of=refs) == []
    many = [ReadBack(reason=APPROVAL_REACTIVATED, ref=f"session://s/events/{i}")
            for i in range(10)]
    assert len(plan(got, many)) == MAX_READ_BACK and plan(got, got) == tuple(got)


def test_a_ref_the_checkpoint_cites_is_not_a_secret() -> None:
    """``session://<id>/events/<n>``: the scheme is not a credential word, so a decision
    citing its source (and the checkpoint detail holding it) is not dropped as a secret."""
    from app.core.detectors.secrets import HIGH_ENTROPY

    cited = "- 决定 [session://s-review-knowledge/events/2] [constraint:15cf21a2dd]"
    assert HIGH_ENTROPY(cited) == []
    assert HIGH_ENTROPY("session token: 8fA3kZ9qL2mN7xB4vC1wE6rT")


def test_session_state_renders_like_a_checkpoint() -> None:
    from app.core.session_state import session_state_candidates

    state = commit(_contract_session(), None, extractor=RuleExtractor(), session_id="s",
                   user_id="u")
    core, detail = session_state_candidates(state, session_id="s/1", tenant_id="t",
                                            count_tokens=len, now=NOW)
    assert core.ref == "session://s%2F1/state/1#core" and core.never_compress
    assert core.content.startswith("Session state (revision 1; the session has no task)")
    assert CLAUSE_ZH in core.content and "EXPIRED" in core.content
    assert not detail.never_compress and "[constraint:" in detail.content


@pytest.mark.parametrize("doc_id", ["contract", "a/b c", "合同:7#2", ".."])
def test_chunk_refs_parse_back(doc_id: str) -> None:
    from app.adapters.postgres.chunk_refs import chunk_key
    from app.core.refs import chunk_ref, event_ref

    assert chunk_key(chunk_ref(doc_id, "2026-06 v1", 3)) == (doc_id, "2026-06 v1", 3)
    assert chunk_key(event_ref("s", 1)) is None and chunk_key("kb://x") is None
    assert readable(chunk_ref(doc_id, "v:1", 0))


def test_turn_validation_wants_the_conclusion_that_cites_a_constraint() -> None:
    from app.core.compile import compile_envelope
    from app.core.validate import validate
    from tests.unit.builders import cand, checkpoint, count

    decision = "We decided: channel customers never get the discount [constraint:abc123]"
    cp = checkpoint(accepted_decisions=(decision, "We decided to use the blue theme"))
    base = [cand("task://a", f"{cp.goal}\n{cp.constraints[0].text}\n{cp.pending_approvals[0]}"),
            cand("task://b", cp.verified_evidence[0])]
    without = validate(compile_envelope(base, count_tokens=count), checkpoint=cp)
    assert not without.ok and without.missing_soft == (decision,)
    with_it = [*base, cand("task://c", decision)]
    assert validate(compile_envelope(with_it, count_tokens=count), checkpoint=cp).ok
