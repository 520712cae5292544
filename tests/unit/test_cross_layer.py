"""One relevance order across retrieved layers (issue 17): knowledge chunks and earlier
sessions' events compete on relevance — a convex combination of cosine similarity and
query-term coverage, both absolute for one query and one embedder — not on which store found
them; the budget fills the dynamic section in that order."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from app.core.candidates import query_candidate
from app.core.guards.relevance import SEMANTIC_WEIGHT, relevance_guard
from app.core.model import (
    Acl,
    Candidate,
    DataLevel,
    KnowledgeHit,
    Layer,
    Section,
    SessionEvent,
    TranscriptHit,
    Trust,
)
from app.core.pipeline import PipelineConfig, assemble
from app.core.retrieval import RETRIEVED_PRIORITY, knowledge_candidates, transcript_candidates
from tests.unit.builders import NOW, TENANT, budget, cand, count, scope

QUERY = "where does my sister live now?"


def chunk(ref: str, text: str, *, vector: int | None = None, fts: int | None = None,
          similarity: float | None = None) -> list[KnowledgeHit]:
    ranks = [("vector", vector), ("fts", fts)]
    return [KnowledgeHit(chunk_ref=ref, doc_id=ref, version="1", chunk_no=0, text=text,
                         tenant_id=TENANT, domain=None, sensitivity=DataLevel.INTERNAL,
                         trust=Trust.REVIEWED, acl=Acl(whole_tenant=True), observed_at=None,
                         expires_at=None, rank=rank, ranker=ranker,
                         similarity=similarity if ranker == "vector" else None)
            for ranker, rank in ranks if rank is not None]


def said(seq: int, text: str, *, vector: int | None = None, fts: int | None = None,
         similarity: float | None = None) -> list[TranscriptHit]:
    event = SessionEvent(seq=seq, type="message", role="user", content=text)
    ranks = [("vector", vector), ("fts", fts)]
    return [TranscriptHit(session_id="old", event=event, rank=rank, ranker=ranker,
                          similarity=similarity if ranker == "vector" else None)
            for ranker, rank in ranks if rank is not None]


def hits(knowledge: Sequence[list[KnowledgeHit]], transcript: Sequence[list[TranscriptHit]]
         ) -> list[Candidate]:
    return [*knowledge_candidates([h for g in knowledge for h in g], count_tokens=count),
            *transcript_candidates([h for g in transcript for h in g], tenant_id=TENANT,
                                   owner_user_id="alice", count_tokens=count)]


def test_both_retrieved_layers_share_one_budget_priority() -> None:
    cs = hits([chunk("kb://a", "text", fts=1)], [said(1, "text", fts=1)])
    assert {c.priority for c in cs} == {RETRIEVED_PRIORITY}


def scored(cs: list[Candidate], query: str = QUERY) -> dict[str, float]:
    kept, _ = relevance_guard(cs, limits={}, floor=0.0, query=query)
    return {c.ref: c.score for c in kept}


def test_meaning_orders_across_layers_by_similarity_not_by_store_rank() -> None:
    kb1 = cand("kb://1", scores=(("vector", 1),), similarity=0.90)
    kb2 = cand("kb://2", scores=(("vector", 2),), similarity=0.80)
    ev1 = cand("session://old/events/1", layer=Layer.SESSION,
               scores=(("transcript_vector", 1),), similarity=0.85)
    ev2 = cand("session://old/events/2", layer=Layer.SESSION,
               scores=(("transcript_vector", 2),), similarity=0.70)
    got = scored([kb1, kb2, ev1, ev2], query="")
    assert sorted(got, key=lambda ref: -got[ref]) == [
        "kb://1", "session://old/events/1", "kb://2", "session://old/events/2"]
    assert got["kb://1"] == pytest.approx(SEMANTIC_WEIGHT * (0.90 - 0.75) / 0.25)
    assert got["session://old/events/2"] == 0.0  # below what unrelated texts score


def test_words_order_across_layers_by_query_term_coverage() -> None:
    kb = cand("kb://1", "my sister", scores=(("fts", 1),))
    ev = cand("session://old/events/1", "my sister lives in Porto now", layer=Layer.SESSION,
              scores=(("transcript", 1),))
    got = scored([kb, ev])
    assert got["session://old/events/1"] > got["kb://1"] > 0.0


def test_a_words_only_hit_does_not_pass_a_close_paraphrase() -> None:
    # RRF gave both rank 1 of their ranker, so the same score; by measure, the chunk that
    # shares a word and little meaning stays behind the paraphrase that shares none.
    word = cand("kb://1", "Where the cafeteria lives: building B.", scores=(("fts", 1),))
    meaning = cand("session://old/events/1", "My sibling moved to Porto.",
                   layer=Layer.SESSION, scores=(("transcript_vector", 1),), similarity=0.85)
    got = scored([word, meaning])
    assert got["session://old/events/1"] > got["kb://1"]


def test_a_closer_event_outscores_the_layers_top_chunks() -> None:
    cs = hits([chunk("kb://a", "Falcon Ledger retries", vector=1, fts=1, similarity=0.80),
               chunk("kb://b", "Falcon Ledger timeouts", vector=2, fts=2, similarity=0.79)],
              [said(1, "My sister moved to Porto last year.", vector=1, fts=1,
                    similarity=0.90)])
    kept, dropped = relevance_guard(cs, limits={}, floor=0.15, query=QUERY)
    assert not dropped
    order = [c.ref for c in sorted(kept, key=lambda c: -c.score)]
    assert order == ["session://old/events/1", "kb://a", "kb://b"]
    top = next(c for c in kept if c.ref == "kb://a")
    assert top.reason.endswith("cc 0.1600 (meaning 0.20, words 0.00; fts#1, vector#1)")


def test_layer_limits_are_decided_within_the_layer() -> None:
    cs = hits([chunk("kb://a", "Falcon Ledger retries", vector=1, similarity=0.80),
               chunk("kb://b", "Falcon Ledger timeouts", vector=2, similarity=0.79)],
              [said(1, "My sister moved to Porto last year.", vector=1, similarity=0.95),
               said(2, "My sister loves Porto.", vector=2, similarity=0.94)])
    kept, dropped = relevance_guard(cs, limits={Layer.KNOWLEDGE: 1, Layer.SESSION: 1},
                                    floor=0.0, query=QUERY)
    assert sorted(c.ref for c in kept) == ["kb://a", "session://old/events/1"]
    assert {d.type for d in dropped} == {"dropped.relevance.layer_limit"}


def test_the_floor_still_drops_off_topic_chunks_before_they_compete() -> None:
    cs = hits([chunk("kb://menu", "Cafeteria menu: Monday lasagna.", vector=1,
                     similarity=0.756)],
              [said(1, "My sister moved to Porto last year.", vector=1, similarity=0.90)])
    kept, dropped = relevance_guard(cs, limits={}, floor=0.15, query=QUERY)
    assert [c.ref for c in kept] == ["session://old/events/1"]
    assert [(d.ref, d.type) for d in dropped] == [("kb://menu",
                                                   "dropped.relevance.below_floor")]


def run(cs: list[Candidate], max_tokens: int) -> list[str]:
    config = PipelineConfig(shares={Section.STABLE: 0.2, Section.SESSION: 0.35,
                                    Section.DYNAMIC: 0.45},
                            limits={Layer.KNOWLEDGE: 8, Layer.SESSION: 8}, floor=0.15)
    q = query_candidate(scope(), QUERY, TENANT, count)
    a, _ = assemble(scope=scope(session_id="new", task_id=None), candidates=[*cs, q],
                    checkpoint=None, budget=budget(max_tokens), now=NOW, count_tokens=count,
                    config=config, query=QUERY)
    return [s.candidate.ref for s in a.envelope.segments if s.candidate.scores]


def test_under_a_tight_budget_the_relevant_event_beats_less_relevant_chunks() -> None:
    filler = " ".join(["Falcon Ledger runbook filler."] * 3)
    cs = hits([chunk(f"kb://doc{i}", f"{filler} item {i}", vector=i, similarity=0.82 - i / 100)
               for i in range(1, 4)],
              [said(7, "My sister moved to Porto last year.", vector=1, similarity=0.9)])
    # Room for the query, the event and one chunk: the event goes in before any chunk.
    assert run(cs, max_tokens=36) == ["session://old/events/7", "kb://doc1"]


def test_a_more_relevant_chunk_still_beats_a_weaker_event() -> None:
    cs = hits([chunk("kb://sister", "Alice's sister lives in Porto.", vector=1, fts=1,
                     similarity=0.92)],
              [said(7, "I visited my sister once.", vector=1, fts=1, similarity=0.80)])
    assert run(cs, max_tokens=15) == ["kb://sister"]
