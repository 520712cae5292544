"""``ctxgate bench --retrieval`` at a tiny scale on the test stores, and the dataset's own
promises: reproducible, round-trips through its JSONL format, every question's evidence
exists, and a paraphrase shares no content word with its evidence but the service's name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import Stemmer

from bench.retrieval import KINDS, SETTINGS, room, run_retrieval, table
from bench.retrieval_baselines import SYSTEMS, tokenize
from bench.retrieval_data import dump, generate, load
from bench.retrieval_templates import KNOWLEDGE, PERSONAL
from bench.run import Config

FUNCTION_WORDS = {"i", "me", "my", "our", "we"}  # kept by BM25's list, no content


def _words(template: str) -> set[str]:
    """A template's content tokens as BM25 sees them, its ``{fields}`` (names, values) left
    out."""
    text = re.sub(r"\{\w+\}", " ", template)
    return set(tokenize(text, Stemmer.Stemmer("english"))) - FUNCTION_WORDS


def test_paraphrases_share_no_word_with_their_evidence() -> None:
    for fact in (*KNOWLEDGE, *PERSONAL):
        said = _words(fact.fact) | _words(fact.update)
        assert not _words(fact.paraphrase) & said, (fact.key, fact.lang)
        assert _words(fact.lexical) & said, (fact.key, fact.lang)


def test_the_baselines_room_is_the_turns_room_for_retrieved_items() -> None:
    manifest = {"token_budget": 4000, "reserve_output": 500, "segments": [
        {"kind": "query", "tokens": 12}, {"kind": "retrieval", "tokens": 300},
        {"kind": "memory", "tokens": 20}, {"kind": "task_state", "tokens": 40}]}
    assert room(manifest) == 4000 - 500 - 12 - 40


def test_the_dataset_is_reproducible_and_its_evidence_exists(tmp_path: Path) -> None:
    data = generate(7, 5)
    assert generate(7, 5) == data
    dump(data, tmp_path / "set.jsonl")
    assert load(tmp_path / "set.jsonl") == data
    docs = {d.doc_id: d.text for d in data.documents}
    sessions = {s.session_id: s for s in data.sessions}
    assert {q.kind for q in data.questions} == set(KINDS)
    assert {q.lang for q in data.questions} == {"en", "zh"}
    for q in data.questions:
        for where, what in q.evidence:
            if q.kind == "knowledge":
                assert str(what) in docs[str(where)]
            else:
                s = sessions[str(where)]
                assert s.user_id == q.user_id and s.events[int(what)][0] == "user"


def test_retrieval_bench_smoke(pg_owner_url: str, redis_url: str, uid: str,
                               tmp_path: Path) -> None:
    out = tmp_path / "retrieval.json"
    data = generate(7, 2)
    rep = run_retrieval(Config(seed=7, out=out, owner_url=pg_owner_url, redis_url=redis_url,
                               prefix=f"b{uid}", progress=False, workers=1),
                        data=data, embedder="instant")
    assert json.loads(out.read_text())["config"]["embedder"] == "instant"
    assert rep["unresolved_evidence"] == []
    assert rep["dataset"]["questions"] and rep["dataset"]["chunks"] > 0
    for name in SETTINGS:
        assert rep["api"][name]["statuses"] == {"200": len(data.questions)}
        for kind in KINDS:
            got = rep["recall"][name][kind]
            assert set(got) == {"api", *SYSTEMS}
            assert all(0.0 <= v <= 1.0 for v in got.values()), got
    # Words alone find lexical questions: the refs the harness compares are the server's.
    assert rep["recall"]["k10"]["knowledge"]["api"] > 0
    assert rep["recall"]["k10"]["session"]["api"] > 0
    assert [t["target"] for t in rep["targets"]] == [
        "evidence recall at 4k tokens, knowledge", "evidence recall at 4k tokens, session"]
    assert all(name in table(rep) for name in SETTINGS)
