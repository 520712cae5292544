"""The evaluation suite format (``ctxgate-eval/1``), documented in docs/eval.md.

A suite is a YAML file of cases. A case declares the API keys it needs (each on one of the
case's tenants, which the runner creates fresh per run) and a list of steps. Every step is one
call of the public HTTP API, made with one of those keys, exactly as a runtime or an ops tool
would make it; ``expect`` on a step states what its answer must show. Nothing in a case
reaches a store directly, so a suite runs unchanged against any server.

``{tenant:NAME}`` and ``{key_id:NAME}`` in a step's path or body are replaced by the run's
tenant id and key id (tenants are named per run, so runs never see each other's data), and
``{saved:NAME}`` by a value an earlier step's ``save`` took from its answer.

A step with ``wait_for`` repeats its call until a value of the answer is reached (what the
server does in the background: embedding appended events), bounded by ``timeout_s``. The
reserved key ``platform`` is the runner's platform admin token, for reads only (``GET``): the
server-wide state such a wait reads (``GET /v1/admin/embeddings``) is not a tenant's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

FORMAT = "ctxgate-eval/1"
SETS = ("facts", "isolation", "compaction")
PLATFORM = "platform"  # the reserved key: the runner's platform admin token, GET only
BUILTIN = Path(__file__).resolve().parent / "suites"

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KeySpec(Strict):
    tenant: Name
    role: Literal["runtime", "ops", "admin"] = "runtime"
    max_data_level: Literal["public", "internal", "confidential", "secret"] = "internal"
    max_session_visibility: Literal["self", "tree", "all"] = "tree"


class Expect(Strict):
    """What the answer of a step must show. Refs match a segment's ``ref`` by prefix, so
    ``kb://doc-a`` covers every chunk and version of that document."""

    status: int | None = Field(default=None, description="the HTTP status; unset: any 2xx")
    relevant: list[str] = Field(default_factory=list, description=(
        "refs that answer the query, best first: Recall@k, MRR, citation precision"))
    must_include: list[str] = Field(default_factory=list, description="refs in the envelope")
    must_exclude: list[str] = Field(default_factory=list, description=(
        "refs never in the envelope or the manifest (another scope's sources)"))
    stale: list[str] = Field(default_factory=list, description=(
        "refs of superseded versions: one in the envelope is a freshness error"))
    must_contain: list[str] = Field(default_factory=list, description=(
        "text the envelope must hold verbatim (goals, qualifiers, decisions)"))
    canaries: list[str] = Field(default_factory=list, description=(
        "text that must appear nowhere in the answer (another scope's secrets)"))
    max_tokens: int | None = Field(default=None, ge=1)
    decision: Literal["accepted", "superseded", "rejected", "pending"] | None = Field(
        default=None, description="a memory write's expected decision")


class WaitFor(Strict):
    """Repeat the step's call until the answer's ``path`` (dotted) equals ``equals``."""

    path: Annotated[str, Field(min_length=1)]
    equals: Any
    timeout_s: float = Field(default=120.0, gt=0, le=1800)
    interval_s: float = Field(default=0.5, gt=0, le=60)


class Step(Strict):
    key: Name
    call: Annotated[str, Field(pattern=r"^(GET|POST|PUT|DELETE) /\S+$")]
    body: dict[str, Any] | None = None
    expect: Expect = Field(default_factory=Expect)
    after_compaction: bool = Field(default=False, description=(
        "this turn's must_contain counts toward compaction fidelity"))
    save: dict[Name, str] = Field(default_factory=dict, description=(
        "NAME -> a dotted path into the answer's JSON (``memory.memory_id``); later steps "
        "use it as {saved:NAME}"))
    wait_for: WaitFor | None = Field(default=None, description=(
        "repeat the call until the answer holds this value (bounded); not reached in time "
        "is a failed check"))

    @model_validator(mode="after")
    def _platform_reads_only(self) -> Step:
        if self.key == PLATFORM and self.method != "GET":
            raise ValueError(f"the {PLATFORM!r} key (the platform admin token) only reads: GET")
        return self

    @property
    def method(self) -> str:
        return self.call.split(" ", 1)[0]

    @property
    def path(self) -> str:
        return self.call.split(" ", 1)[1]


class Case(Strict):
    id: Name
    set: Literal["facts", "isolation", "compaction"]
    story: str = ""
    keys: dict[Name, KeySpec]
    steps: list[Step] = Field(min_length=1)

    @model_validator(mode="after")
    def _keys_declared(self) -> Case:
        if PLATFORM in self.keys:
            raise ValueError(f"{PLATFORM!r} is reserved for the platform admin token")
        unknown = sorted({s.key for s in self.steps} - set(self.keys) - {PLATFORM})
        if unknown:
            raise ValueError(f"steps use undeclared keys: {unknown}")
        return self


class Bound(Strict):
    min: float | None = None
    max: float | None = None

    def holds(self, value: float | None) -> bool:
        if value is None:
            return True  # a metric with no observation in this suite has nothing to fail
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)


class Suite(Strict):
    format: Literal["ctxgate-eval/1"]
    name: Name
    version: Name
    k: int = Field(default=5, ge=1, le=100, description="the k of Recall@k")
    thresholds: dict[str, Bound] = Field(default_factory=dict, description=(
        "metric -> bound on its aggregate; compare also uses them on each side"))
    max_regression: dict[str, float] = Field(default_factory=dict, description=(
        "metric -> the largest allowed worsening of B against A in `eval compare`"))
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> Suite:
        ids = [c.id for c in self.cases]
        if len(ids) != len(set(ids)):
            raise ValueError("case ids must be unique")
        return self


def load(spec: str) -> Suite:
    """A suite by path, or by the name of one shipped with ctxgate (``starter``)."""
    path = Path(spec)
    if not path.exists() and (BUILTIN / f"{spec}.yaml").exists():
        path = BUILTIN / f"{spec}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return Suite.model_validate(data)
