"""Stage 7 — the budget: what fits into ``max_tokens - reserve_output``.

Contract: ``allocate(candidates, budget=..., shares=...)`` returns the candidates that fit and
``Drop`` records (layer ``budget``). Tokens are the ones already set on the candidates (the
compact form, since referencing ran before). Guarantees:

* ``usable = max_tokens - reserve_output``; the kept total never exceeds it.
* ``never_compress`` content always goes in. If ``reserve_output >= max_tokens`` or the
  never-compress content alone exceeds ``usable``, ``BudgetTooSmall`` is raised with the numbers:
  silently dropping a goal or a constraint is worse than refusing the turn.
* Each section gets ``floor(share * usable)`` minus the never-compress tokens already in it.
  Candidates fill their section by priority desc, score desc, newest session ``seq`` first,
  then ref. What did not fit its section gets a second chance, in the same order, against the
  leftover of all sections together, so an unused share is not wasted.
* A tool_call and its tool_result (same ``call_id`` in ``meta``) are one unit: both or neither.
  A unit holding a never-compress member is pinned whole.

Drop types: ``dropped.budget.section_full`` (it lost to higher-ranked content: its share and
the leftover were taken) and ``dropped.budget.over_total`` (it is larger than the whole budget
left after the never-compress content, so it could never fit).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from app.core.errors import BudgetTooSmall
from app.core.model import Budget, Candidate, Drop, DropLayer, Section

_Key = tuple[int, float, tuple[int, int], str]


class _Unit:
    """Candidates admitted or dropped together (one, or a tool call with its result). Its
    totals are computed once: the allocation reads them for every unit against every
    section, and a turn has ~150 units."""

    __slots__ = ("key", "members", "needs", "pinned", "tokens")

    def __init__(self, members: tuple[Candidate, ...]) -> None:
        self.members = members
        self.tokens = sum(c.tokens for c in members)
        self.pinned = any(c.never_compress for c in members)
        self.key: _Key = min(order_key(c) for c in members)
        self.needs: dict[Section, int] = {}
        for c in members:
            self.needs[c.section] = self.needs.get(c.section, 0) + c.tokens

    def need(self, section: Section) -> int:
        return self.needs.get(section, 0)


def order_key(c: Candidate) -> _Key:
    recency = (0, -c.seq) if c.seq is not None else (1, 0)
    return (-c.priority, -c.score, recency, c.ref)


def usable_tokens(budget: Budget) -> int:
    if budget.reserve_output >= budget.max_tokens:
        raise BudgetTooSmall(
            f"reserve_output {budget.reserve_output} leaves nothing of max_tokens "
            f"{budget.max_tokens}"
        )
    return budget.max_tokens - budget.reserve_output


def _units(candidates: Iterable[Candidate]) -> list[_Unit]:
    by_call: dict[str, list[Candidate]] = {}
    groups: list[list[Candidate]] = []
    for c in candidates:
        call_id = c.meta_value("call_id")
        if call_id is None:
            groups.append([c])
        elif call_id in by_call:
            by_call[call_id].append(c)
        else:
            by_call[call_id] = [c]
            groups.append(by_call[call_id])
    return [_Unit(tuple(g)) for g in groups]


def _drop(c: Candidate, type_: str, reason: str) -> Drop:
    return Drop(ref=c.ref, kind=c.kind, layer=DropLayer.BUDGET, type=type_, reason=reason)


def allocate(
    candidates: Iterable[Candidate], *, budget: Budget, shares: Mapping[Section, float]
) -> tuple[list[Candidate], list[Drop]]:
    items = list(candidates)
    usable = usable_tokens(budget)
    units = _units(items)
    pinned = [u for u in units if u.pinned]
    pinned_total = sum(u.tokens for u in pinned)
    if pinned_total > usable:
        # Refs and counts only (the detail reaches the client and the logs, never content):
        # what to shrink, or why the budget must grow, without reading the manifest.
        largest = sorted((c for u in pinned for c in u.members if c.never_compress),
                         key=lambda c: -c.tokens)[:3]
        raise BudgetTooSmall(
            f"never-compress content needs {pinned_total} tokens but only {usable} are usable "
            f"(max_tokens {budget.max_tokens} - reserve_output {budget.reserve_output}); "
            "largest: " + ", ".join(f"{c.ref} ({c.tokens})" for c in largest)
        )
    left = {s: max(0, math.floor(shares.get(s, 0.0) * usable) - sum(u.need(s) for u in pinned))
            for s in Section}
    used = pinned_total
    taken: list[_Unit] = list(pinned)
    deferred: list[_Unit] = []
    for u in sorted((u for u in units if not u.pinned), key=lambda u: u.key):
        if used + u.tokens <= usable and all(n <= left[s] for s, n in u.needs.items()):
            taken.append(u)
            used += u.tokens
            for s, n in u.needs.items():
                left[s] -= n
        else:
            deferred.append(u)
    dropped: list[Drop] = []
    for u in deferred:  # second chance: the leftover of every section, same order
        if used + u.tokens <= usable:
            taken.append(u)
            used += u.tokens
            continue
        dropped.extend(_unit_drops(u, usable - used, usable - pinned_total))
    keep = {id(c) for u in taken for c in u.members}
    return [c for c in items if id(c) in keep], dropped


def _unit_drops(u: _Unit, remaining: int, open_budget: int) -> list[Drop]:
    if u.tokens > open_budget:
        type_, why = "dropped.budget.over_total", f"exceeds the {open_budget} tokens left"
    else:
        type_, why = "dropped.budget.section_full", f"only {remaining} tokens left"
    pair = f" (with its pair, {u.tokens} tokens)" if len(u.members) > 1 else ""
    # explain (app.core.explain) reads section, need and room back from this wording.
    return [_drop(c, type_, f"{c.section.value} section: needs {c.tokens} tokens{pair}; {why}")
            for c in u.members]
