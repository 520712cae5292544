"""Replays: recorded turns assembled again under variants, compared (``app.service.replay``)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.deps import ContainerDep, OpsDep
from app.api.routing import OrjsonRoute
from app.api.schemas import BudgetIn, Id, Problem, RetrievalIn, Wire
from app.core.model import Budget
from app.core.replay import Variant
from app.ports_explain import TurnSelection
from app.service import degraded

router = APIRouter(tags=["manifests"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (401, 403, 422, 429, 503)}
MAX_TURNS = 200
MAX_VARIANTS = 4
# Dry runs in one request (turns x variants): at ~40 ms each on a loaded core, about the
# longest a client should wait on one answer; a larger replay is several requests.
MAX_RUNS = 400


class VariantIn(Wire):
    """One configuration; a field left out keeps what the turn recorded."""

    name: Id
    budget: BudgetIn | None = None
    retrieval: RetrievalIn | None = Field(
        default=None, description="replaces the turn's limits; memory_limit 0 is memory off")
    redaction_profile: Id | None = None
    bundle_revision: Id | None = Field(
        default=None, description="any registered revision of the turn's bundle (promoted or "
                                  "not: nothing is served)")
    compaction: bool = Field(
        default=True, description="false: the raw history window instead of the session's "
                                  "stored compaction view (a replay never makes one)")

    def to_domain(self) -> Variant:
        b = self.budget
        return Variant(
            name=self.name, redaction_profile=self.redaction_profile,
            budget=Budget(max_tokens=b.max_tokens, reserve_output=b.reserve_output)
            if b is not None else None,
            retrieval=self.retrieval.to_domain() if self.retrieval is not None else None,
            bundle_revision=self.bundle_revision, compaction=self.compaction)


class ReplayIn(Wire):
    """Which turns (one of ``turn_ids``, ``session_id``, a ``turn_id_from``/``turn_id_to``
    range, or none: the newest), under which variants (default: one, ``recorded``, the turn
    as it was asked)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "session_id": "sess_8f2c", "limit": 20,
        "variants": [{"name": "live"}, {"name": "rev-v4", "bundle_revision": "v4"},
                     {"name": "no-memory", "retrieval": {"memory_limit": 0}},
                     {"name": "4k", "budget": {"max_tokens": 4000, "reserve_output": 800}}]}]})

    turn_ids: list[Id] = Field(default_factory=list, max_length=MAX_TURNS)
    session_id: Id | None = None
    turn_id_from: Id | None = None
    turn_id_to: Id | None = None
    limit: int = Field(default=50, ge=1, le=MAX_TURNS)
    variants: list[VariantIn] = Field(default_factory=list, max_length=MAX_VARIANTS)

    @model_validator(mode="after")
    def _distinct(self) -> ReplayIn:
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError("variant names must be distinct")
        if len(set(self.turn_ids)) != len(self.turn_ids):
            raise ValueError("turn_ids must be distinct")
        if self._turns * max(1, len(self.variants)) > MAX_RUNS:
            raise ValueError(f"at most {MAX_RUNS} dry runs a request (turns x variants): "
                             f"lower limit or send fewer variants")
        return self

    @property
    def _turns(self) -> int:
        """At most how many turns the selection holds (named turns count past ``limit``)."""
        return max(self.limit, len(self.turn_ids))

    def selection(self) -> TurnSelection:
        return TurnSelection(turn_ids=tuple(self.turn_ids), session_id=self.session_id,
                             turn_id_from=self.turn_id_from, turn_id_to=self.turn_id_to,
                             limit=self._turns)

    def domain_variants(self) -> list[Variant]:
        return [v.to_domain() for v in self.variants] or [Variant(name="recorded")]


class ReplayOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "content": "none",
        "summary": {"live": {"turns": 1, "ok": 1, "errors": {}, "median_tokens": 1812,
                             "median_overlap_with_recorded": 1.0, "turns_changed": 0}},
        "turns": [{
            "turn_id": "turn_0193", "status": "replayed", "session_id": "sess_8f2c",
            "recorded": {"total_tokens": 1812, "stable_prefix_sha256": "9c1e...",
                         "dropped": {"relevance": 3},
                         "segments": [{"ref": "kb://refund-runbook#v3:c2", "section": "dynamic",
                                       "tokens": 412, "content_sha256": "4be0..."}]},
            "variants": {"live": {
                "status": "ok", "degraded": [],
                "shape": {"total_tokens": 1812, "stable_prefix_sha256": "9c1e...",
                          "dropped": {"relevance": 3},
                          "segments": [{"ref": "kb://refund-runbook#v3:c2",
                                        "section": "dynamic", "tokens": 412,
                                        "content_sha256": "4be0..."}]},
                "vs_recorded": {"added": [], "removed": [], "changed": [],
                                "tokens_delta": 0, "overlap": 1.0,
                                "same_stable_prefix": True}}}}]}]})

    turns: list[dict[str, Any]] = Field(
        description="per turn: status (replayed | not_found | not_replayable), the recorded "
                    "shape and, per variant, its shape, vs_recorded and vs_first diffs "
                    "(docs/eval.md#replaying-recorded-turns); refs, tokens and hashes only")
    summary: dict[str, dict[str, Any]] = Field(description="per variant")
    content: Literal["none"] = Field(
        default="none", description="no query, segment or envelope text is ever returned")


@router.post("/v1/replays", response_model=ReplayOut, responses=ERRORS)  # type: ignore[arg-type]
async def replay(body: ReplayIn, principal: OpsDep, container: ContainerDep) -> ReplayOut:
    """Ops and admin keys: assemble the tenant's recorded turns again, as dry runs (nothing
    is written: no manifest, session event, compaction, audit record or metric), under up to
    four variants, and compare each with what the turn recorded and with the first variant.
    A named turn of another tenant reads as ``not_found``, like a missing one. The replay is
    one turn in flight for the tenant's quota and the worker's admission (429 / 503 with
    ``Retry-After`` when full): its dry runs go one after another, never beside live turns
    in more than one slot."""
    with degraded.recording():  # a quota check without Redis is the replay's own business
        async with container.quotas.turn(principal), container.admission.slot():
            got = await container.replays.replay(principal, body.selection(),
                                                 body.domain_variants())
    return ReplayOut(turns=got.turns, summary=got.summary)
