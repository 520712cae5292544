"""Scenario 3 of the seeds: per-turn prompt tokens over a 200-turn session must flatten.

Reproduce the numbers in docs/compaction.md:
    python -m pytest -q -s tests/unit/test_compaction_cost.py
"""

from __future__ import annotations

from statistics import mean

from app.core.compaction import CompactionOutcome, ExtractiveSummarizer, Origin, run_compaction
from app.core.compaction.text import render_event
from app.core.model import SessionEvent
from tests.unit.test_compaction_fidelity import count_tokens

BUDGET = 4000
COMPACT_AT = 0.8
SID = "s-cost"


def turn(events: list[SessionEvent], n: int) -> None:
    seq = len(events)
    text = f"Turn {n}: please check host web-{n % 17} and summarize its status."
    events.append(SessionEvent(seq=seq, type="message", role="user", content=text))
    events.append(SessionEvent(seq=seq + 1, type="tool_call", call_id=f"c{n}", name="check_host",
                               arguments={"host": f"web-{n % 17}"}))
    events.append(SessionEvent(seq=seq + 2, type="tool_result", call_id=f"c{n}",
                               name="check_host", content=f"host web-{n % 17}: ok. " * 25))
    reply = f"Host web-{n % 17} is healthy; nothing to do."
    if n % 40 == 5:
        reply += f" We decided to keep web-{n % 17} in the pool."
    if n == 3:
        reply = "Policy: restarts are limited to at most 2 hosts per hour, before 18:00 only."
    events.append(SessionEvent(seq=seq + 3, type="message", role="assistant", content=reply))


def simulate(turns: int = 200) -> tuple[list[int], list[int], list[CompactionOutcome]]:
    events: list[SessionEvent] = []
    with_c, without, runs = [], [], []
    prefix, cut, checkpoint, last_id = "", 0, None, None
    for n in range(turns):
        turn(events, n)
        tail = "\n\n".join(render_event(e, SID) for e in events if e.seq >= cut)
        prompt = count_tokens(f"{prefix}\n\n{tail}" if prefix else tail)
        if prompt > COMPACT_AT * BUDGET:
            out = run_compaction(events, checkpoint, origin=Origin(session_id=SID, task_id="t"),
                                 budget_tokens=BUDGET, compact_at=COMPACT_AT, keep_recent=8,
                                 summarizer=ExtractiveSummarizer(), count_tokens=count_tokens,
                                 previous_compaction_id=last_id)
            assert out.action in ("compaction.completed", "compaction.pruned"), out.check
            if out.compaction is not None and out.compaction.cut_seq is not None:
                runs.append(out)
                checkpoint, last_id = out.checkpoint, out.compaction_id
                cut = out.compaction.cut_seq
                prefix = "\n\n".join(i.content for i in out.view.items if i.kind != "event")
            prompt = out.tokens_after
        with_c.append(prompt)
        without.append(count_tokens("\n\n".join(render_event(e, SID) for e in events)))
    return with_c, without, runs


def test_prompt_tokens_stay_bounded_over_200_turns() -> None:
    with_c, without, runs = simulate()
    late, mid = mean(with_c[150:]), mean(with_c[50:100])
    print(f"\nbudget={BUDGET} compact_at={COMPACT_AT} compactions={len(runs)}")
    print(f"with compaction: max={max(with_c)} mean50-100={mid:.0f} mean150-200={late:.0f} "
          f"total={sum(with_c)}")
    print(f"without: turn50={without[49]} turn100={without[99]} turn200={without[-1]} "
          f"total={sum(without)}")
    print(f"one compaction: before={runs[-1].tokens_before} after={runs[-1].tokens_after}")
    assert max(with_c) <= BUDGET
    assert late <= mid * 1.25  # flat, not growing with the turn count
    assert without[-1] > 3.5 * without[49]  # the uncompacted baseline grows linearly
    assert runs[-1].lineage.previous_compaction_id == runs[-2].compaction_id
    assert runs[-1].checkpoint is not None
    assert any("at most 2 hosts" in c.text for c in runs[-1].checkpoint.constraints)
    assert "at most 2 hosts" in runs[-1].view.text
