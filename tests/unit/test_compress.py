from __future__ import annotations

import math
import random

from app.adapters.tokenizers.tiktoken_counter import TiktokenCounter
from app.core.compress import head_excerpt, reference_long
from app.core.model import Candidate, Kind, Section
from tests.unit.builders import cand, count, words


def run(*cs: Candidate, threshold: int = 50, excerpt: int = 10) -> list[Candidate]:
    return reference_long(cs, threshold_tokens=threshold, excerpt_tokens=excerpt,
                          count_tokens=count)


def test_long_tool_result_becomes_handle_and_excerpt() -> None:
    c = cand("tool://r1", words(200), kind=Kind.TOOL_RESULT, reason="tool result")
    (out,) = reference_long([c], threshold_tokens=50, excerpt_tokens=10, count_tokens=count)
    first, body = out.content.split("\n", 1)
    assert first == "[ref tool://r1 · 200 tokens · excerpt]"
    assert body == words(10) + "…"
    assert out.tokens == count(out.content)
    assert out.reason == f"tool result; referenced: 200→{out.tokens} tokens"


def test_long_retrieval_is_referenced_too() -> None:
    (out,) = reference_long([cand("kb://a", words(80), reason="")], threshold_tokens=50,
                            excerpt_tokens=5, count_tokens=count)
    assert out.content.startswith("[ref kb://a · 80 tokens · excerpt]")
    assert out.reason.startswith("referenced: 80→")


def test_untouched_cases() -> None:
    short = cand("kb://s", words(50))
    pinned = cand("kb://p", words(200), never_compress=True)
    other = cand("mem://m", words(200), kind=Kind.MEMORY)
    session = cand("s://1", words(200), kind=Kind.SESSION, section=Section.SESSION)
    assert run(short, pinned, other, session) == [short, pinned, other, session]


def test_reference_not_shorter_than_original_is_skipped() -> None:
    c = cand("kb://a", words(12))
    assert run(c, threshold=5, excerpt=11) == [c]


def test_missing_tokens_are_counted() -> None:
    c = cand("kb://a", words(60), tokens=0)
    (out,) = reference_long([c], threshold_tokens=50, excerpt_tokens=5, count_tokens=count)
    assert "60 tokens" in out.content


def test_excerpt_is_the_longest_prefix_within_budget_in_log_calls() -> None:
    text = "x" * 10_000
    calls: list[int] = []

    def chars(s: str) -> int:
        calls.append(len(s))
        return math.ceil(len(s) / 4)

    head = head_excerpt(text, 100, chars)
    assert len(head) == 400
    assert len(calls) <= math.ceil(math.log2(10_001)) + 1


def test_excerpt_prefers_a_nearby_word_boundary() -> None:
    text = "alpha beta gamma delta epsilon"
    assert head_excerpt(text, 25, len) == "alpha beta gamma delta"
    assert head_excerpt("abc", 10, len) == "abc"


def test_a_known_count_finds_the_same_prefix_reading_only_short_ones() -> None:
    tokenizer = TiktokenCounter("o200k_base", cache_size=0)
    rng = random.Random(7)
    pieces = ["refund", "timeout", "退款接口超时", "kubectl get pods -n prod", "0x7f3a", "\n",
              "  ", "数据库主从切换", "p99=412ms", "😀", "é", "{\"k\": [1, 2]}"]
    calls: list[int] = []

    def counted(s: str) -> int:
        calls.append(len(s))
        return tokenizer(s)

    for _ in range(60):
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(200, 900)))
        total, budget = tokenizer(text), rng.choice([8, 40, 96, 200])
        calls.clear()
        fast = head_excerpt(text, budget, counted, total_tokens=total)
        whole = head_excerpt(text, budget, tokenizer)  # a binary search over the whole text
        assert fast == whole and tokenizer(fast) <= budget
        assert len(calls) <= 16 and max(calls) <= 3 * len(whole) + 64
