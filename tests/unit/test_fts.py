"""app.core.fts: CJK bigrams, lowercased words, escape-free query lexemes."""

from __future__ import annotations

import re

import pytest

from app.core import fts


def test_normalize_bigrams_cjk_runs_and_lowercases_words() -> None:
    assert fts.normalize("Refund 退款接口超时!") == "refund 退款 款接 接口 口超 超时"


def test_normalize_single_cjk_char_stays_and_scripts_split() -> None:
    assert fts.normalize("退API超时") == "退 api 超时"
    assert fts.normalize("a,b;c") == "a b c"
    assert fts.normalize("") == ""


def test_normalize_drops_overlong_words() -> None:
    assert fts.normalize("x" * (fts.MAX_WORD_CHARS + 1) + " ok") == "ok"


def test_chinese_query_matches_chunk_with_words_between() -> None:
    chunk = set(fts.normalize("退款服务的接口调用超时了").split())
    terms = set(fts.query_terms("退款接口超时"))
    assert {"退款", "接口", "超时"} <= chunk & terms


def test_query_terms_are_escape_free_and_distinct() -> None:
    terms = fts.query_terms("What's the p99 of refund_v2? 'OR' | ! & (x) <-> café 退款")
    safe = re.compile(r"[a-z0-9_]+|[\u4e00-\u9fff]{1,2}")
    assert all(safe.fullmatch(t) for t in terms)
    assert "the" not in terms  # stop word
    assert "café" not in terms  # non-ASCII Latin words are indexed but not queried
    assert terms.count("or") <= 1
    assert "refund_v2" in terms
    assert "退款" in terms


def test_query_terms_are_bounded() -> None:
    text = " ".join(f"w{i}" for i in range(500))
    assert len(fts.query_terms(text)) == fts.MAX_QUERY_TERMS


@pytest.mark.parametrize(("text", "expected"), [
    ("why does the refund time out?", "refund | time"),
    ("退款接口", "退款 | 款接 | 接口"),
    ("the of !!", None),
    ("", None),
])
def test_tsquery(text: str, expected: str | None) -> None:
    assert fts.tsquery(text) == expected


def _reference_tokens(text: str) -> list[str]:
    """The first, plain implementation: the fast one must say exactly the same."""
    token = re.compile(rf"(?P<cjk>[{fts._CJK}]+)|(?P<word>[^\W{fts._CJK}]+)")
    out: list[str] = []
    for m in token.finditer(text):
        if m.group("cjk") is not None:
            out.extend(fts._bigrams(m.group("cjk")))
        elif len(m.group("word")) <= fts.MAX_WORD_CHARS:
            out.append(m.group("word").lower())
    return out


def _reference_terms(text: str) -> list[str]:
    safe = re.compile(r"[a-z0-9_]+")
    seen: dict[str, None] = {}
    for term in _reference_tokens(text):
        if term in fts._STOP_WORDS or not (safe.fullmatch(term) or fts._CJK_RUN.fullmatch(term)):
            continue
        seen.setdefault(term, None)
        if len(seen) >= fts.MAX_QUERY_TERMS:
            break
    return list(seen)


def test_tokens_and_terms_match_the_reference_on_mixed_unicode() -> None:
    import random

    rng = random.Random(7)
    alphabet = ("abcXYZ09_ -.,!?\n\t" "éßİıǅΣσКк\u212a\u0307²" "退款接口超时ひらカナ한글"
                "\U00020001\U0001f600")
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        if rng.random() < 0.1:
            text += "x" * rng.randint(60, 70)  # around MAX_WORD_CHARS
        assert fts.tokens(text) == _reference_tokens(text), text
        assert fts.query_terms(text) == _reference_terms(text), text
    ascii_words = ["Refund", "the", "TIMEOUT", "a_b", "x" * 64, "y" * 65, "Is", "42"]
    for _ in range(2000):  # ASCII text takes its own path
        words = [rng.choice(ascii_words) + str(rng.randrange(60)) * (rng.random() < 0.3)
                 for _ in range(rng.randint(0, 90))]
        text = "".join(w + rng.choice(" .,\n-") for w in words)
        assert fts.query_terms(text) == _reference_terms(text), text


def test_function_words_alone_search_for_nothing() -> None:
    assert fts.tsquery("did") is None
    assert fts.tsquery("What did the team do, and how?") == "team"


def test_stem_strips_one_inflection() -> None:
    assert {fts.stem(w) for w in ("research", "researching", "researched", "researches")} == {
        "research"}
    assert fts.stem("bus") == "bus"  # too short to strip


def test_coverage_counts_stemmed_query_terms_in_the_text() -> None:
    assert fts.coverage(fts.query_terms("researching refunds"), "Research on refund") == 1.0
    assert fts.coverage(fts.query_terms("refund timeout"), "the cafeteria menu") == 0.0
    assert fts.coverage(fts.query_terms("退款超时"), "退款接口超时") == pytest.approx(2 / 3)
    assert fts.coverage([], "anything") == 0.0
