"""Trust-order conflicts between included segments (seeds: the higher source wins)."""

from __future__ import annotations

import hashlib
import random

from app.core.conflicts import _POLARITY, _POLARITY_WORDS, _sentence, authority, find_conflicts
from app.core.fts import query_terms
from app.core.model import Acl, Candidate, DataLevel, Kind, Layer, Section, Segment, Trust

CONSTRAINT = "The discount applies only before 2026-06-30, channel customers excepted"


def seg(ref: str, kind: Kind, trust: Trust, content: str, layer: Layer = Layer.KNOWLEDGE,
        origin: str = "test") -> Segment:
    c = Candidate(ref=ref, kind=kind, layer=layer, section=Section.DYNAMIC, role="system",
                  content=content, tenant_id="t", origin=origin, trust=trust,
                  sensitivity=DataLevel.INTERNAL, acl=Acl(whole_tenant=True))
    return Segment(id="seg", candidate=c, content=content, tokens=1,
                   content_sha256=hashlib.sha256(content.encode()).hexdigest())


def test_a_retrieved_document_contradicting_the_task_contract_is_recorded() -> None:
    task = seg("task://t/checkpoint/1#core", Kind.TASK_STATE, Trust.SYSTEM, CONSTRAINT,
               Layer.TASK)
    doc = seg("kb://forum#v1:c0", Kind.RETRIEVAL, Trust.UNTRUSTED,
              "Good news: the discount applies to channel customers as well.")
    (conflict,) = find_conflicts((doc, task))
    assert conflict.higher_ref == task.candidate.ref
    assert conflict.lower_ref == doc.candidate.ref
    assert (conflict.higher_authority, conflict.lower_authority) == (
        "task_contract", "retrieved_document")
    assert conflict.resolution == "higher_wins"


def test_agreeing_or_unrelated_segments_are_not_conflicts() -> None:
    task = seg("task://t", Kind.TASK_STATE, Trust.SYSTEM, CONSTRAINT, Layer.TASK)
    same = seg("kb://policy", Kind.RETRIEVAL, Trust.REVIEWED,
               "The discount applies only to orders before 2026-06-30; channel customers "
               "are excepted.")
    other = seg("kb://runbook", Kind.RETRIEVAL, Trust.REVIEWED,
                "Refund calls time out when the payment gateway is slow.")
    assert find_conflicts((task, same, other)) == ()


def test_chinese_qualifiers_conflict_too() -> None:
    task = seg("task://t", Kind.TASK_STATE, Trust.SYSTEM, "该折扣仅限渠道客户除外的订单使用",
               Layer.TASK)
    guess = seg("memory://m1", Kind.MEMORY, Trust.INFERRED, "该折扣渠道客户的订单可以使用")
    (conflict,) = find_conflicts((task, guess))
    assert conflict.lower_authority == "model_generated_memory"


def test_authority_follows_the_seeds_order() -> None:
    managed = seg("policy://m", Kind.INSTRUCTION, Trust.SYSTEM, "x", origin="managed-policy")
    project = seg("repo://AGENTS.md", Kind.INSTRUCTION, Trust.REVIEWED, "x")
    pref = seg("memory://p", Kind.MEMORY, Trust.CURATED, "x", Layer.USER)
    task = seg("task://t", Kind.TASK_STATE, Trust.SYSTEM, "x", Layer.TASK)
    doc = seg("kb://d", Kind.RETRIEVAL, Trust.REVIEWED, "x")
    inferred = seg("memory://i", Kind.MEMORY, Trust.INFERRED, "x", Layer.USER)
    query = seg("turn://query", Kind.QUERY, Trust.CURATED, "x", Layer.TURN)
    ranks = [authority(s) for s in (managed, task, project, pref, doc, inferred)]
    assert ranks == [0, 1, 2, 3, 4, 5]
    assert authority(query) is None


def test_bounded_on_huge_inputs() -> None:
    big = seg("kb://big", Kind.RETRIEVAL, Trust.UNTRUSTED, "channel discount customers. " * 50_000)
    task = seg("task://t", Kind.TASK_STATE, Trust.SYSTEM, CONSTRAINT, Layer.TASK)
    assert len(find_conflicts((task, big))) == 1


def test_ascii_sentences_read_polarity_and_terms_as_the_regex_does() -> None:
    rng = random.Random(11)
    words = [*_POLARITY_WORDS, "NOT", "Never", "don't", "CAN'T", "n'T", "knot", "nothing",
             "not_yet", "no1", "only-if", "must", "restart", "the", "db", "x" * 70, "Until."]
    for _ in range(3000):
        sentence = "".join(rng.choice(words) + rng.choice(" ,-'_/()") for _ in
                           range(rng.randint(0, 12)))
        terms, polar = _sentence(sentence)
        assert polar == (_POLARITY.search(sentence) is not None), sentence
        assert terms == frozenset(query_terms(sentence)), sentence
