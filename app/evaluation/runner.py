"""``ctxgate eval run``: a suite's steps against a server, scored.

Contract: each case gets fresh tenants (``eval-<run>-<case>-<alias>``) and fresh keys made with
the platform admin token, so a run reads nothing but what its own steps wrote and two runs on
one server never meet. A configuration (``Config``) changes what every turn asks for
(``request``: merged into each ``POST /v1/context`` body) and, on an embedded server, how the
server is started (``env``); ``eval compare`` runs one suite under two of them. A
configuration's ``workspace`` (e.g. ``{revision: X}``, comparing two bundle revisions) goes
only into turns that name a workspace: a turn without a bundle has no revision to pin.
A step's ``wait_for`` repeats its call every ``interval_s`` until the answer holds the value or
``timeout_s`` has passed (then a failed check, and the run goes on); the last answer is scored.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from app.evaluation.metrics import Answer, Scored, Segment, aggregate, score
from app.evaluation.suite import PLATFORM, Case, Step, Suite

TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Config:
    name: str = "default"
    request: dict[str, Any] = field(default_factory=dict)  # merged into every turn's body
    env: dict[str, str] = field(default_factory=dict)  # the embedded server's environment

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Config:
        unknown = set(data) - {"name", "request", "env"}
        if unknown:
            raise ValueError(f"unknown configuration fields: {sorted(unknown)}")
        return cls(name=str(data.get("name", "default")), request=dict(data.get("request", {})),
                   env={str(k): str(v) for k, v in dict(data.get("env", {})).items()})


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` deep-merged into a copy of ``base`` (dicts merge, everything else replaces)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def turn_body(body: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """A turn's body under a configuration's ``request``."""
    if "workspace" not in body:
        request = {k: v for k, v in request.items() if k != "workspace"}
    return merge(body, request)


def substitute(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for placeholder, actual in names.items():
            value = value.replace(placeholder, actual)
        return value
    if isinstance(value, dict):
        return {k: substitute(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, names) for v in value]
    return value


def answer_of(step: Step, response: httpx.Response) -> Answer:
    """The parts of a response the metrics read."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return Answer(status=response.status_code, text=response.text)
    envelope, manifest = body.get("envelope"), body.get("manifest")
    if isinstance(envelope, dict) and isinstance(manifest, dict):
        # a memory the write gate made from an event names the event as its origin
        origins = {s.get("id"): s.get("origin") or "" for s in manifest.get("segments", [])}
        segments = tuple(Segment(ref=s["ref"], kind=s["kind"], tokens=s["tokens"],
                                 content=s["content"], origin=origins.get(s.get("id"), ""))
                         for s in envelope["segments"])
        named = [s.get("ref", "") for s in manifest.get("segments", [])]
        named += [d.get("ref", "") for d in manifest.get("dropped", [])]
        return Answer(status=response.status_code, text=response.text, segments=segments,
                      manifest_refs=tuple(named), total_tokens=envelope.get("total_tokens"))
    return Answer(status=response.status_code, text=response.text,
                  decision=body.get("decision") if step.path.startswith("/v1/memories") else None)


def dig(response: httpx.Response, path: str) -> Any:
    """The value at a dotted path of a JSON answer (``memory.memory_id``), or None."""
    try:
        value: Any = response.json()
    except ValueError:
        return None
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


@dataclass(slots=True)
class CaseResult:
    case: Case
    steps: list[tuple[Step, Scored]]
    seconds: float

    @property
    def passed(self) -> bool:
        return all(s.passed for _, s in self.steps)


@dataclass(slots=True)
class RunResult:
    suite: Suite
    config: Config
    server: str
    started_at: str
    cases: list[CaseResult]

    def metrics(self) -> dict[str, float | None]:
        out = aggregate(s.samples for c in self.cases for _, s in c.steps)
        out["case_pass_rate"] = round(sum(c.passed for c in self.cases) / len(self.cases), 4)
        return out

    def threshold_results(self) -> list[tuple[str, str, float | None, bool]]:
        got = self.metrics()
        return [(m, b.model_dump_json(exclude_none=True), got.get(m), b.holds(got.get(m)))
                for m, b in self.suite.thresholds.items()]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cases) and all(
            ok for *_, ok in self.threshold_results())


class Runner:
    def __init__(self, base_url: str, admin_token: str, *, config: Config | None = None,
                 progress: Callable[[int, int, str], None] | None = None) -> None:
        self._base, self._admin = base_url.rstrip("/"), admin_token
        self._config = config or Config()
        self._progress = progress
        self._run = secrets.token_hex(3)

    async def run(self, suite: Suite) -> RunResult:
        started = datetime.now(UTC).isoformat(timespec="seconds")
        results = []
        async with httpx.AsyncClient(base_url=self._base, timeout=TIMEOUT_S) as client:
            for i, case in enumerate(suite.cases):
                if self._progress:
                    self._progress(i, len(suite.cases), case.id)
                results.append(await self._case(client, suite, case, i))
            if self._progress:
                self._progress(len(suite.cases), len(suite.cases), "done")
        return RunResult(suite=suite, config=self._config, server=self._base,
                         started_at=started, cases=results)

    async def _keys(self, client: httpx.AsyncClient, case: Case, n: int) -> dict[str, str]:
        """Creates the case's keys; returns the placeholder table and, under ``key:NAME``,
        each key's secret."""
        names: dict[str, str] = {}
        for alias in {k.tenant for k in case.keys.values()}:
            names[f"{{tenant:{alias}}}"] = f"eval-{self._run}-{n}-{alias}"
        for key_name, spec in case.keys.items():
            r = await client.post("/v1/admin/keys", headers=_bearer(self._admin), json={
                "tenant_id": names[f"{{tenant:{spec.tenant}}}"], "role": spec.role,
                "max_data_level": spec.max_data_level,
                "max_session_visibility": spec.max_session_visibility,
                "name": f"ctxgate eval {case.id} {key_name}"})
            if r.status_code != 201:
                raise RuntimeError(f"creating key {key_name} of case {case.id}: "
                                   f"{r.status_code} {r.text[:300]}")
            made = r.json()
            names[f"{{key_id:{key_name}}}"] = made["key_id"]
            names[f"key:{key_name}"] = made["api_key"]
        names[f"key:{PLATFORM}"] = self._admin
        return names

    async def _case(self, client: httpx.AsyncClient, suite: Suite, case: Case,
                    n: int) -> CaseResult:
        t0 = time.perf_counter()
        names = await self._keys(client, case, n)
        table = {k: v for k, v in names.items() if not k.startswith("key:")}
        scored = []
        for step in case.steps:
            body = substitute(step.body, table) if step.body is not None else None
            if step.call == "POST /v1/context" and body is not None:
                body = turn_body(body, self._config.request)
            r, reached = await _call(client, step, substitute(step.path, table), body,
                                     _bearer(names[f"key:{step.key}"]))
            result = score(step.expect, answer_of(step, r), k=suite.k,
                           after_compaction=step.after_compaction)
            if step.wait_for is not None:
                result.checks.append((f"{step.wait_for.path} reached {step.wait_for.equals!r} "
                                      f"within {step.wait_for.timeout_s:g} s", reached))
            for name, path in step.save.items():
                value = dig(r, path)
                result.checks.append((f"answer has {path}", value is not None))
                table[f"{{saved:{name}}}"] = str(value)
            scored.append((step, result))
        return CaseResult(case=case, steps=scored, seconds=time.perf_counter() - t0)


async def _call(client: httpx.AsyncClient, step: Step, url: str, body: Any,
                headers: dict[str, str]) -> tuple[httpx.Response, bool]:
    """The step's answer, and whether its ``wait_for`` was reached (True without one)."""
    r = await client.request(step.method, url, json=body, headers=headers)
    wait = step.wait_for
    if wait is None:
        return r, True
    deadline = time.monotonic() + wait.timeout_s
    while dig(r, wait.path) != wait.equals:
        if time.monotonic() >= deadline:
            return r, False
        await asyncio.sleep(wait.interval_s)
        r = await client.request(step.method, url, json=body, headers=headers)
    return r, True


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def progress_bar(done: int, total: int, label: str) -> None:
    """A one-line progress bar on stderr (only on a terminal: logs stay clean)."""
    if not sys.stderr.isatty():
        return
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label[:40]:40}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()
