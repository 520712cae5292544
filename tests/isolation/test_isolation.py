"""Guards in depth: the attack matrix, run in four modes (see conftest.MODES).

In the three guarded modes every case must hold: no canary in any response or log record,
no 5xx, forbidden indistinguishable from missing, and A still sees its own data. In the
control mode (no RLS, no tenant/ACL predicates, no permission guard) the same matrix must
find leaks, which proves the checks can fail.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest

from app.adapters.postgres import knowledge, sessions
from app.adapters.postgres.db import Sql
from app.core import pipeline
from app.core.guards.permission import permission_guard
from tests.isolation.attacks import Runner, build_cases, log_text
from tests.isolation.conftest import (
    ACL_PREDICATE,
    ADAPTERS,
    GUARDED_MODES,
    TENANT_PREDICATE,
    Env,
    Summary,
    pass_through_permission,
    sql_texts,
)
from tests.isolation.plant import bearer, turn_body

LOGGERS = ("app", "uvicorn", "asyncpg")
TABLES = ("sessions", "session_events", "task_checkpoints", "knowledge_chunks", "manifests",
          "audit_log")
MIN_REWRITTEN = 12  # SQL globals holding a tenant predicate across the five adapters


async def test_the_mode_is_what_it_claims(armed: Env) -> None:
    mode, p = armed.mode, armed.plant
    predicates = [(f"{m.__name__}.{n}", s) for m in ADAPTERS for n, s in sql_texts(m)
                  if TENANT_PREDICATE.search(s)]
    if mode in ("no-query-filter", "control"):
        assert armed.patched >= MIN_REWRITTEN, armed.patched
        assert predicates == [], predicates  # every tenant predicate really is gone
        assert "TRUE" in sessions.INFO_SQL and "TRUE" in knowledge.VISIBLE
    else:
        assert armed.patched == 0
        assert len(predicates) >= MIN_REWRITTEN
    acl_left = [n for n, s in sql_texts(knowledge) if ACL_PREDICATE.search(s)]
    if mode == "control":
        assert acl_left == []
        assert vars(pipeline)["permission_guard"] is pass_through_permission
    else:
        assert acl_left
        assert vars(pipeline)["permission_guard"] is permission_guard

    async with armed.container.db.tenant_tx(p.ta) as conn:
        seen = {table: set(await conn.fetchcol(Sql(f"SELECT DISTINCT tenant_id FROM {table}")))
                for table in TABLES}
    for table, tenants in seen.items():
        if mode in ("no-rls", "control"):  # RLS is off: an unfiltered SELECT sees B's rows
            assert p.tb in tenants, (table, tenants)
        else:
            assert tenants <= {p.ta}, (table, tenants)


async def _b_still_intact(armed: Env) -> list[str]:
    """B's rows after the attacks: nothing A did touched them."""
    c, p = armed.client, armed.plant
    ids, problems = p.ids, []
    r = await c.get(f"/v1/sessions/{ids['b_session']}/events",
                    params={"user_id": ids["b_user"]}, headers=bearer(p.keys["b_rt"]))
    if r.status_code != 200 or len(r.json()["events"]) != 3 or ids["b_event_message"] \
            not in r.text:
        problems.append(f"B's session changed: {r.status_code} {r.text[:200]}")
    r = await c.get(f"/v1/tasks/{ids['b_task']}/checkpoint", headers=bearer(p.keys["b_rt"]),
                    params={"user_id": ids["b_user"]})
    if r.status_code != 200 or r.json()["revision"] != 2:
        problems.append(f"B's task changed: {r.status_code} {r.text[:200]}")
    r = await c.get(f"/v1/manifests/{ids['b_turn']}", headers=bearer(p.keys["b_ops"]))
    if r.status_code != 200 or r.json()["tenant_id"] != p.tb:
        problems.append(f"B's manifest changed: {r.status_code} {r.text[:200]}")
    r = await c.post("/v1/context", headers=bearer(p.keys["b_rt"]),
                     json=turn_body(p, user=ids["b_user"]))
    if r.status_code != 200 or ids["b_doc_all_text"] not in r.text:
        problems.append(f"B's document was superseded: {r.status_code} {r.text[:200]}")
    return problems


async def test_attack_matrix(armed: Env, caplog: pytest.LogCaptureFixture,
                             summary: Summary) -> None:
    mode, p = armed.mode, armed.plant
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    guarded = mode in GUARDED_MODES
    runner = Runner(p, guarded=guarded, records=caplog.records)
    if not guarded:  # the scan's own teeth: no library logs rows, so plant one record
        logging.getLogger("app.isolation-probe").debug("probe %s", p.tb)
    cases = build_cases(p)
    started = time.perf_counter()
    await runner.run(armed.client, cases)
    elapsed = time.perf_counter() - started

    logs = [log_text(r) for r in caplog.records]
    # Content of B and expired content are never sent by an attack: in no record, ever.
    never = [t for t in p.content if p.classes[t] in ("B", "X")] + [p.tb]
    log_leaks = sorted({f"any -> {p.name_of(t)}" for t in never for line in logs
                        if t.lower() in line} | set(runner.log_leaks))
    caplog.clear()

    attacks = [o for o in runner.outcomes if not o.observe]
    leaking = [o for o in attacks if o.leaks]
    problems = [o for o in runner.outcomes if o.problems]
    integrity = await _b_still_intact(armed) if guarded else []
    summary.modes[mode] = {
        "attack_cases": len(attacks),
        "leaking_cases": len(leaking),
        "leaked_canaries": len({t for o in leaking for t in o.leaks}),
        "log_records": len(logs),
        "log_leaks": len(log_leaks),
        "sql_rewritten": armed.patched,
        "observations": runner.observations,
        "failed_checks": sum(len(o.problems) for o in problems),
        "status_5xx": sum(o.status >= 500 for o in attacks),
        "seconds": round(elapsed, 2),
        "leaking_cases_by_family": dict(Counter(o.case.split("/")[0] for o in leaking)),
        "attack_cases_by_family": dict(Counter(o.case.split("/")[0] for o in attacks)),
        "sample_leaks": [f"{o.case}: {o.leaks[:2]}" for o in leaking[:5]],
    }
    if guarded:
        report = [f"{o.case} [{o.status}] leaks={o.leaks}" for o in leaking]
        report += [f"{o.case} [{o.status}] {msg}" for o in problems for msg in o.problems]
        report += [f"log leak: {t}" for t in log_leaks]
        report += [f"{o.case} [{o.status}] 5xx" for o in runner.outcomes
                   if o.observe and o.status >= 500]
        report += integrity
        assert not report, f"{len(report)} failures in mode {mode}:\n" + "\n".join(report)
    else:
        assert leaking, "the control mode found no leak: the suite has no teeth"
        assert log_leaks, "the log scan missed the canary planted in the control mode"
