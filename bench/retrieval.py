"""``ctxgate bench --retrieval``: evidence recall of ``POST /v1/context`` against BM25 and
dense-only baselines computed in the same run, over the same corpus.

Steps, on fresh stores and a started server (``bench.run._stores``/``_server``, embedding
with ``--embedder``): one runtime key that may read all of a user's sessions; the knowledge
documents ingested through the API (the server chunks and embeds them); every earlier
session written through ``POST /v1/sessions/{id}/events`` in its order; a wait until the
server has embedded every event (its background job) and its write gate has settled. Then
each question is asked as the first turn of a brand-new session of its user, with
``session_visibility: all``, once per setting (``SETTINGS``): budgets of 2,000 and 4,000
tokens at the server's budget-sized depth, and k = 5 and 10 as the request's per-layer limits
(``knowledge_limit``/``session_limit``) under a budget that does not bind.

A question's evidence (``bench.retrieval_data``) is a set of refs (``app.core.refs``): every
current chunk of its document holding the quote, or the event's archive ref. It is recalled
when a manifest segment's ``ref`` is one of them, or its ``origin`` is (a memory the write gate
made from that event; counted apart as ``via_memory``). The baselines (``bench.
retrieval_baselines``) rank the chunks and the user's events the server stored, with the
server's own vectors, and keep the top k per layer or what fills the budget.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import orjson

from app.adapters.tokenizers.tiktoken_counter import TiktokenCounter
from app.core.model import DataLevel, Role, Visibility
from app.core.refs import chunk_ref, event_ref
from bench import api_ingest, ingest
from bench.retrieval_baselines import SYSTEMS, Baselines, Item
from bench.retrieval_data import Question, RetrievalSet, Session
from bench.run import Config, _machine, _server, _store_versions, _stores

# setting -> (max_tokens, per-layer limit or None for the budget-sized default)
K_BUDGET = 16_000
SETTINGS: dict[str, tuple[int, int | None]] = {
    "2k": (2000, None), "4k": (4000, None), "k5": (K_BUDGET, 5), "k10": (K_BUDGET, 10)}
KINDS = ("knowledge", "session")
GOALS = {"knowledge": 0.90, "session": 0.80}  # at 4k, and above the best baseline
CONCURRENCY = 4
DOC_BATCH = 20
# One answer: status, latency ms, the segments' (ref, origin), total tokens, dropped ref -> type,
# and the turn's room for retrieved content (``room``): the baselines get the same
Answer = tuple[int, float, list[tuple[str, str]], int, dict[str, str], int]
RETRIEVED_KINDS = frozenset({"retrieval", "memory"})


async def _key(owner_url: str, tenant: str) -> str:
    from app.adapters.postgres.db import Database
    from app.adapters.postgres.keys import PgKeyStore
    from app.ports import NewKey
    from app.service.keys import KeyService

    db = await Database.open(owner_url, role="ctxgate_app", password=None, pool_size=1)
    try:
        return (await KeyService(PgKeyStore(db)).create(NewKey(
            tenant_id=tenant, role=Role.RUNTIME, max_data_level=DataLevel.INTERNAL,
            domains=None, name="bench-retrieval", max_session_visibility=Visibility.ALL)))[1]
    finally:
        await db.close()


async def _each(jobs: Sequence[Any], call: Callable[[Any], Any]) -> list[Any]:
    """``call`` on every job, ``CONCURRENCY`` at a time; results in job order."""
    out: list[Any] = [None] * len(jobs)
    todo = list(enumerate(jobs))[::-1]

    async def worker() -> None:
        while todo:
            i, job = todo.pop()
            out[i] = await call(job)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return out


async def _write(client: httpx.AsyncClient, data: RetrievalSet) -> dict[str, list[int]]:
    """Documents, then each user's sessions in their order (users side by side); each
    session's seqs."""
    docs = [{"doc_id": d.doc_id, "version": "1", "title": d.title, "text": d.text,
             "sensitivity": "internal", "trust": "reviewed", "acl": None}
            for d in data.documents]
    for i in range(0, len(docs), DOC_BATCH):
        r = await client.post("/v1/knowledge/documents", json={"items": docs[i:i + DOC_BATCH]})
        r.raise_for_status()
    seqs: dict[str, list[int]] = {}
    by_user: dict[str, list[Session]] = {}
    for s in data.sessions:
        by_user.setdefault(s.user_id, []).append(s)

    async def write(sessions: list[Session]) -> None:
        for s in sessions:  # a user's, one at a time: file order is their chronology
            r = await client.post(f"/v1/sessions/{s.session_id}/events", json={
                "user_id": s.user_id, "events": [
                    {"type": "message", "role": role, "content": text}
                    for role, text in s.events]})
            r.raise_for_status()
            seqs[s.session_id] = list(r.json()["seqs"])

    await _each(list(by_user.values()), write)
    return seqs


async def _settle(owner_url: str, tenant: str, timeout_s: float = 1800.0) -> int:
    """Wait until every event is embedded and the memory count has stopped moving."""
    conn = await ingest.owner_connection(owner_url)
    try:
        await conn.execute("SELECT set_config('app.tenant_id', $1, false)", tenant)
        deadline, last = time.monotonic() + timeout_s, -1
        while time.monotonic() < deadline:
            left = await conn.fetchval("SELECT count(*) FROM session_events WHERE tenant_id = $1 "
                                       "AND embedding IS NULL AND search_text <> ''", tenant)
            memories = await conn.fetchval("SELECT count(*) FROM memories WHERE tenant_id = $1",
                                           tenant)
            if left == 0 and memories == last:
                return int(memories)
            last = memories if left == 0 else -1
            await asyncio.sleep(1.0)
        raise RuntimeError("the server did not embed every event in time")
    finally:
        await conn.close()


async def _corpus(owner_url: str, tenant: str, count: TiktokenCounter) -> list[Item]:
    conn = await ingest.owner_connection(owner_url)
    try:
        await conn.execute("SELECT set_config('app.tenant_id', $1, false)", tenant)
        chunks = await conn.fetch("SELECT doc_id, version, chunk_no, text, tokens, embedding "
                                  "FROM knowledge_chunks WHERE tenant_id = $1 AND is_current "
                                  "ORDER BY doc_id, chunk_no", tenant)
        events = await conn.fetch(
            "SELECT e.session_id, e.seq, e.content, e.embedding, s.user_id FROM session_events e "
            "JOIN sessions s USING (tenant_id, session_id) WHERE e.tenant_id = $1 "
            "AND e.embedding IS NOT NULL ORDER BY e.session_id, e.seq", tenant)
    finally:
        await conn.close()
    return [*(Item(chunk_ref(r["doc_id"], r["version"], r["chunk_no"]), "knowledge", None,
                   r["text"], r["tokens"], r["embedding"].to_numpy().astype(np.float32))
              for r in chunks),
            *(Item(event_ref(r["session_id"], r["seq"]), "session", r["user_id"], r["content"],
                   count(r["content"]), r["embedding"].to_numpy().astype(np.float32))
              for r in events)]


def evidence(q: Question, items: Sequence[Item], seqs: dict[str, list[int]]) -> set[str]:
    """The refs that answer ``q``: chunks of its document holding the quote, or the event."""
    if q.kind == "session":
        return {event_ref(str(sid), seqs[str(sid)][int(i)]) for sid, i in q.evidence}
    out = set()
    for doc_id, quote in q.evidence:
        prefix = chunk_ref(str(doc_id), "1", 0).rsplit("#", 1)[0] + "#"
        out |= {i.ref for i in items if i.ref.startswith(prefix) and str(quote) in i.text}
    return out


async def _ask(base: str, key: str, data: RetrievalSet) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    jobs = [(q, name) for name in SETTINGS for q in data.questions]

    async def ask(job: tuple[Question, str]) -> Answer:
        q, name = job
        max_tokens, k = SETTINGS[name]
        body: dict[str, Any] = {
            "user_id": q.user_id, "session_id": f"ask-{q.qid}-{name}", "query": q.query,
            "data_level": "internal", "budget": {"max_tokens": max_tokens},
            "session_visibility": "all"}
        if k is not None:
            body["retrieval"] = {"knowledge_limit": k, "session_limit": k}
        t0 = time.perf_counter()
        r = await client.post("/v1/context", content=orjson.dumps(body), headers=headers)
        ms = (time.perf_counter() - t0) * 1000
        if r.status_code != 200:
            return r.status_code, ms, [], 0, {}, max_tokens
        m = orjson.loads(r.content)["manifest"]
        return (200, ms, [(s["ref"], s["origin"]) for s in m["segments"]], m["total_tokens"],
                {d["ref"]: d["type"] for d in m["dropped"]}, room(m))

    async with httpx.AsyncClient(base_url=base, timeout=300.0, headers={
            "content-type": "application/json"}) as client:
        t0 = time.perf_counter()
        got = await _each(jobs, ask)
        wall = time.perf_counter() - t0
    return {"answers": {(q.qid, name): g for (q, name), g in zip(jobs, got, strict=True)},
            "wall_s": wall}


def room(manifest: dict[str, Any]) -> int:
    """The tokens a turn had for retrieved content: its usable budget less what it spent on
    anything else (the query; on a new session nothing more). A baseline ranks the same
    corpus into exactly this room, so neither side gains from the other's framing."""
    usable = int(manifest["token_budget"]) - int(manifest["reserve_output"])
    return usable - sum(int(s["tokens"]) for s in manifest["segments"]
                        if s["kind"] not in RETRIEVED_KINDS)


def _query_vectors(embedder: str, queries: Sequence[str]) -> list[npt.NDArray[np.float32]]:
    """The questions embedded as the server embeds a query (its model, its prefix)."""
    if embedder == "instant":
        return [np.asarray(api_ingest.client_vector(q), dtype=np.float32) for q in queries]
    from app.adapters.embedders.e5 import E5Embedder

    e5 = E5Embedder()

    async def go() -> list[list[float]]:
        return [await e5.embed_query(q) for q in queries]

    return [np.asarray(v, dtype=np.float32) for v in asyncio.run(go())]


def _rate(hits: Sequence[bool]) -> float | None:
    return round(sum(hits) / len(hits), 4) if hits else None


def score(data: RetrievalSet, items: Sequence[Item], seqs: dict[str, list[int]],
          answers: dict[tuple[str, str], Answer], vectors: Sequence[npt.NDArray[np.float32]]
          ) -> dict[str, Any]:
    """Recall per setting, kind and system, and per style/language; why the API missed (the
    evidence's drop type in the manifest, else ``not_retrieved``)."""
    base = Baselines(items)
    hits: dict[tuple[str, str, str], list[tuple[Question, bool]]] = {}
    via_memory: Counter[str] = Counter()
    why_missed: dict[str, Counter[str]] = {}
    unresolved = []
    for q, vec in zip(data.questions, vectors, strict=True):
        want = evidence(q, items, seqs)
        if not want:
            unresolved.append(q.qid)
            continue
        ranked = {s: base.ranked(s, q.user_id, q.query, vec) for s in SYSTEMS}
        for name, (_, k) in SETTINGS.items():
            _, _, segs, _, dropped, budget = answers[(q.qid, name)]
            direct = any(ref in want for ref, _ in segs)
            memory = not direct and any(origin in want for _, origin in segs)
            via_memory[f"{name}/{q.kind}"] += memory
            if not (direct or memory):
                why = next((dropped[r] for r in sorted(want) if r in dropped), "not_retrieved")
                why_missed.setdefault(f"{name}/{q.kind}", Counter())[why] += 1
            hits.setdefault((name, q.kind, "api"), []).append((q, direct or memory))
            for s in SYSTEMS:
                kept = (base.top_k(ranked[s], k) if k is not None
                        else base.within_budget(ranked[s], budget))
                got = any(base.items[n].ref in want for n in kept)
                hits.setdefault((name, q.kind, s), []).append((q, got))
    recall: dict[str, Any] = {}
    detail: dict[str, Any] = {}
    for (name, kind, system), hs in sorted(hits.items()):
        recall.setdefault(name, {}).setdefault(kind, {})[system] = _rate([h for _, h in hs])
        groups = {g: _rate([h for q, h in hs if g in (q.style, q.lang)])
                  for g in ("lexical", "paraphrase", "en", "zh")}
        detail.setdefault(name, {}).setdefault(kind, {})[system] = groups
    missed = {kind: [q.qid for q, h in hits.get(("4k", kind, "api"), []) if not h][:40]
              for kind in KINDS}
    return {"recall": recall, "by_group": detail, "via_memory": dict(sorted(via_memory.items())),
            "api_why_missed": {k: dict(v.most_common()) for k, v in sorted(why_missed.items())},
            "unresolved_evidence": unresolved, "api_missed_at_4k": missed}


def _stats(data: RetrievalSet, items: Sequence[Item]) -> dict[str, Any]:
    return {"documents": len(data.documents),
            "chunks": sum(i.layer == "knowledge" for i in items),
            "users": len({s.user_id for s in data.sessions}), "sessions": len(data.sessions),
            "events": sum(len(s.events) for s in data.sessions),
            "questions": dict(sorted(Counter(
                f"{q.kind}/{q.style}/{q.lang}" for q in data.questions).items()))}


def _api_extras(answers: dict[tuple[str, str], Answer]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SETTINGS:
        mine = [a for (_, n), a in answers.items() if n == name]
        ms = sorted(a[1] for a in mine)
        out[name] = {"statuses": dict(sorted(Counter(str(a[0]) for a in mine).items())),
                     "p50_ms": round(ms[len(ms) // 2], 1) if ms else None,
                     "mean_tokens": round(float(np.mean([a[3] for a in mine])), 1)
                     if mine else None}
    return out


def targets(recall: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for kind, goal in GOALS.items():
        r = recall.get("4k", {}).get(kind, {})
        api = r.get("api")
        best = max((r[s] for s in SYSTEMS if r.get(s) is not None), default=None)
        met = None if api is None else api >= goal and (best is None or api > best)
        out.append({"target": f"evidence recall at 4k tokens, {kind}",
                    "goal": f">= {goal:.2f} and above the best baseline",
                    "measured": f"{api} (best baseline {best})",
                    "status": "not measured" if met is None else ("met" if met else "missed")})
    return out


def run_retrieval(cfg: Config, *, data: RetrievalSet, embedder: str = "e5",
                  log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The whole benchmark on ``data``; the report (also written to ``cfg.out``)."""
    if embedder not in ("e5", "instant"):
        raise ValueError("the retrieval benchmark needs the server's embedder: e5 or instant")
    t_start = time.perf_counter()
    tenant = f"{cfg.prefix}-retrieval"
    times: dict[str, float] = {}
    count = TiktokenCounter()
    with _stores(cfg) as (owner_url, redis_url), api_ingest.server_env(embedder) as env, \
            _server(owner_url, redis_url, f"ctxgate-{cfg.prefix}", cfg.workers,
                    env) as (base, _):
        stores = _store_versions(owner_url, redis_url)
        key = asyncio.run(_key(owner_url, tenant))

        async def write() -> dict[str, list[int]]:
            async with httpx.AsyncClient(base_url=base, timeout=600.0, headers={
                    "Authorization": f"Bearer {key}"}) as client:
                return await _write(client, data)

        t0 = time.perf_counter()
        seqs = asyncio.run(write())
        times["write_s"] = time.perf_counter() - t0
        log(f"wrote {len(data.documents)} documents and {len(data.sessions)} sessions "
            f"in {times['write_s']:.0f} s; waiting for the server to embed the events")
        t0 = time.perf_counter()
        memories = asyncio.run(_settle(owner_url, tenant))
        times["settle_s"] = time.perf_counter() - t0
        items = asyncio.run(_corpus(owner_url, tenant, count))
        log(f"settled in {times['settle_s']:.0f} s ({memories} memories); asking "
            f"{len(data.questions)} questions x {len(SETTINGS)} settings")
        asked = asyncio.run(_ask(base, key, data))
        times["ask_s"] = asked["wall_s"]
    t0 = time.perf_counter()
    vectors = _query_vectors(embedder, [q.query for q in data.questions])
    scored = score(data, items, seqs, asked["answers"], vectors)
    times["baselines_s"] = time.perf_counter() - t0
    rep: dict[str, Any] = {
        "config": {"seed": cfg.seed, "embedder": embedder, "server_workers": cfg.workers,
                   "settings": {n: {"max_tokens": b, "per_layer_limit": k}
                                for n, (b, k) in SETTINGS.items()},
                   "baseline_budget": "the API turn's room for retrieved items (its usable "
                                      "budget less its non-retrieved segments), by rank"},
        "machine": _machine(), "stores": stores,
        "dataset": {**_stats(data, items), "memories_written": memories},
        **scored, "api": _api_extras(asked["answers"]),
        "targets": targets(scored["recall"]),
        "times_s": {k: round(v, 1) for k, v in times.items()},
        "total_s": round(time.perf_counter() - t_start, 1)}
    if cfg.out is not None:
        cfg.out.parent.mkdir(parents=True, exist_ok=True)
        cfg.out.write_bytes(orjson.dumps(rep, option=orjson.OPT_INDENT_2) + b"\n")
    return rep


def table(rep: dict[str, Any]) -> str:
    """The recall table as printed: a row per setting, api/bm25/dense per kind."""
    head = f"{'setting':>8} | " + " | ".join(
        f"{kind + ' api':>14} {'bm25':>6} {'dense':>6}" for kind in KINDS)
    rows = [head, "-" * len(head)]
    for name in SETTINGS:
        cells = []
        for kind in KINDS:
            r = rep["recall"].get(name, {}).get(kind, {})
            cells.append(" ".join(f"{'-' if r.get(s) is None else f'{r[s]:.3f}':>{w}}"
                                  for s, w in (("api", 14), ("bm25", 6), ("dense", 6))))
        rows.append(f"{name:>8} | " + " | ".join(cells))
    return "\n".join(rows)
