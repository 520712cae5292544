from __future__ import annotations

import hashlib
import json

from app.core.compile import compile_envelope
from app.core.model import (
    CacheBreakpoint,
    Candidate,
    Kind,
    Layer,
    Rendering,
    Section,
    Trust,
)
from tests.unit.builders import cand, count


def stable(ref: str, content: str, kind: Kind = Kind.MEMORY) -> Candidate:
    return cand(ref, content, section=Section.STABLE, kind=kind, layer=Layer.TEAM)


def session(seq: int, content: str = "hi") -> Candidate:
    return cand(f"session://s/events/{seq}", content, section=Section.SESSION,
                kind=Kind.SESSION, layer=Layer.SESSION, role="user", seq=seq)


def mixed() -> list[Candidate]:
    return [
        cand("turn://query", "why timeout?", kind=Kind.QUERY, role="user", trust=Trust.CURATED),
        cand("kb://low", "low", score=0.1),
        session(7, "later"),
        cand("task://t/checkpoint/1#detail", "detail", kind=Kind.TASK_STATE),
        stable("mem://b", "memory b"),
        cand("kb://high", "high", score=0.9),
        cand("kb://also-high", "also", score=0.9),
        session(2, "earlier"),
        stable("bundle://z", "instruction z", Kind.INSTRUCTION),
        cand("task://t/checkpoint/1#core", "core", kind=Kind.TASK_STATE),
        stable("mem://a", "memory a"),
    ]


def test_segment_order_ids_hashes_and_total() -> None:
    env = compile_envelope(mixed(), count_tokens=count)
    assert [s.candidate.ref for s in env.segments] == [
        "bundle://z", "mem://a", "mem://b",
        "session://s/events/2", "session://s/events/7",
        "task://t/checkpoint/1#core", "task://t/checkpoint/1#detail",
        "kb://also-high", "kb://high", "kb://low", "turn://query",
    ]
    assert [s.id for s in env.segments] == [f"seg_{i}" for i in range(1, 12)]
    seg = env.segments[0]
    assert seg.content_sha256 == hashlib.sha256(b"instruction z").hexdigest()
    assert seg.tokens == 2
    assert env.total_tokens == sum(s.tokens for s in env.segments)


def test_tokens_are_recounted() -> None:
    env = compile_envelope([cand("kb://a", "three word text", tokens=99)], count_tokens=count)
    assert env.segments[0].tokens == 3
    assert env.total_tokens == 3


def test_stable_hash_is_canonical_over_ref_and_content() -> None:
    env = compile_envelope(mixed(), count_tokens=count)
    canonical = json.dumps([["bundle://z", "instruction z"], ["mem://a", "memory a"],
                            ["mem://b", "memory b"]], ensure_ascii=False, separators=(",", ":"))
    assert env.stable_prefix_sha256 == hashlib.sha256(canonical.encode()).hexdigest()


def test_stable_hash_ignores_input_order_and_dynamic_or_session_changes() -> None:
    base = compile_envelope(mixed(), count_tokens=count).stable_prefix_sha256
    reordered = compile_envelope(list(reversed(mixed())), count_tokens=count)
    assert reordered.stable_prefix_sha256 == base
    changed = [*mixed()[1:], cand("turn://query", "another question", kind=Kind.QUERY),
               session(9, "new turn"), cand("kb://new", "fresh retrieval", score=0.99)]
    assert compile_envelope(changed, count_tokens=count).stable_prefix_sha256 == base


def test_stable_hash_changes_with_stable_content() -> None:
    a = compile_envelope([stable("mem://a", "v1")], count_tokens=count)
    b = compile_envelope([stable("mem://a", "v2")], count_tokens=count)
    assert a.stable_prefix_sha256 != b.stable_prefix_sha256


def test_empty_envelope() -> None:
    env = compile_envelope([], count_tokens=count)
    assert env.segments == ()
    assert env.messages == ()
    assert env.total_tokens == 0
    assert env.stable_prefix_sha256 == hashlib.sha256(b"[]").hexdigest()


def test_messages_follow_section_order() -> None:
    env = compile_envelope(mixed(), count_tokens=count)
    roles = [m["role"] for m in env.messages]
    # stable, the session's two messages, then the final user turn: task state, reviewed
    # references, the query (no system message after the first)
    assert roles == ["system", "user", "user", "user", "user", "user"]
    assert env.messages[0]["content"] == "instruction z\n\nmemory a\n\nmemory b"
    assert env.messages[-1] == {"role": "user", "content": "why timeout?"}
    assert env.render is Rendering.OPENAI
    assert env.system is None
    assert env.cache_breakpoint == CacheBreakpoint(location="messages", index=0)


def test_anthropic_rendering_is_chosen_by_the_request() -> None:
    env = compile_envelope(mixed(), count_tokens=count, rendering=Rendering.ANTHROPIC)
    assert env.render is Rendering.ANTHROPIC
    assert env.system is not None
    assert [b["text"] for b in env.system] == [
        "instruction z", "memory a", "memory b", "core", "detail"]
    assert env.cache_breakpoint == CacheBreakpoint(location="system", index=2)
    assert [m["role"] for m in env.messages] == ["user"]
    assert env.messages[0]["content"][-1] == {"type": "text", "text": "why timeout?"}
