"""Replay recorded production turns under variants, without their content leaving the tenant.

Contract: ``ReplayService.replay(principal, selection, variants)`` selects the caller's
tenant's recorded turns (``TurnSelection``: named turns, a session's, a ``turn_id`` range),
rebuilds each turn's request and scope from its manifest and its ``recorded`` record
(``app.core.replay``), and assembles it again once per ``Variant`` as a dry run
(``Assembler.dry_run``: the session as of the turn, the stores as they are now, nothing
written). Each run is reduced to its shape -- refs, sections, tokens, content hashes, drops
per stage -- and compared with what the turn recorded and with the first variant. No text of
a turn (query, segment, envelope) is in the answer.

* ``ForbiddenScope`` for a runtime key: a replay reads every user's turns of the tenant.
* A named turn that is missing, another tenant's, or whose record was cleared by an erasure
  (or predates records) is listed with status ``not_found`` / ``not_replayable``: the same
  answer for another tenant's turn as for a missing one.
* A variant that fails for one turn (e.g. ``budget-too-small``, a bundle revision that does
  not exist) is that turn's ``error`` with the problem type, not the replay's failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.core.errors import DomainError, ForbiddenScope
from app.core.explain import recorded_scope
from app.core.model import Principal, Role, Scope, TurnRequest
from app.core.replay import AsOf, Variant, as_of, diff, replay_request, shape, summarize
from app.ports_explain import RecordedTurn, TurnSelection, TurnSelector


class DryRun(Protocol):
    """What a replay asks of the assembler (``Assembler.dry_run``)."""

    async def dry_run(self, scope: Scope, req: TurnRequest, *, as_of: AsOf, compaction: bool
                      ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Replayed:
    turns: list[dict[str, Any]]
    summary: dict[str, dict[str, Any]]  # per variant


class ReplayService:
    def __init__(self, *, turns: TurnSelector, assembler: DryRun) -> None:
        self._turns = turns
        self._assembler = assembler

    async def replay(self, principal: Principal, selection: TurnSelection,
                     variants: Sequence[Variant]) -> Replayed:
        if principal.role is Role.RUNTIME:
            raise ForbiddenScope("replay is for ops and admin keys")
        found = await self._turns.select(tenant_id=principal.tenant_id, selection=selection)
        rows: list[dict[str, Any]] = []
        by_id = {t.turn_id: t for t in found}
        ids = list(selection.turn_ids) or [t.turn_id for t in found]
        for turn_id in ids:
            turn = by_id.get(turn_id)
            if turn is None:
                rows.append({"turn_id": turn_id, "status": "not_found"})
            elif not turn.recorded:
                rows.append({"turn_id": turn_id, "status": "not_replayable"})
            else:
                rows.append(await self._one(principal, turn, variants))
        return Replayed(turns=rows, summary={v.name: summarize(rows, v.name) for v in variants})

    async def _one(self, principal: Principal, turn: RecordedTurn,
                   variants: Sequence[Variant]) -> dict[str, Any]:
        recorded = turn.recorded or {}
        scope = recorded_scope(tenant_id=principal.tenant_id, key_id=turn.key_id,
                               body=turn.body, recorded=recorded)
        was = shape(turn.body)
        point = as_of(turn.body, recorded)
        out: dict[str, Any] = {"turn_id": turn.turn_id, "status": "replayed",
                               "session_id": turn.body.get("session_id"),
                               # "client": the turn sent its own query vector, which is not
                               # kept; the replay's is the server's (retrieval may differ)
                               "query_vector": recorded.get("query_vector", "server"),
                               "recorded": was.to_json(), "variants": {}}
        first = None
        for variant in variants:
            req = replay_request(turn_id=turn.turn_id, scope=scope, body=turn.body,
                                 recorded=recorded, variant=variant)
            try:
                manifest = await self._assembler.dry_run(scope, req, as_of=point,
                                                         compaction=variant.compaction)
            except DomainError as exc:
                # the problem type the turn itself would have answered with
                out["variants"][variant.name] = {"status": "error", "error": exc.type}
                continue
            now = shape(manifest)
            result: dict[str, Any] = {"status": "ok", "shape": now.to_json(),
                                      "vs_recorded": diff(was, now),
                                      "degraded": manifest.get("degraded") or []}
            if first is None:
                first = now
            else:
                result["vs_first"] = diff(first, now)
            out["variants"][variant.name] = result
        return out
