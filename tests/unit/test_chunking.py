"""chunk_text: budget, boundaries, overlap, determinism — with simple counters and tiktoken."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from app.core.chunking import chunk_text

RUNBOOK = """# Restarting the ingest worker

1. Check the queue depth with `ctl queue stats`. If it is above 10k, wait for it to drain.
2. Rotate the credentials in the vault. Then restart the worker.
3. Verify that messages flow again; the lag should drop within five minutes.

If the worker fails to start, read the logs. Common causes are an expired certificate, a \
wrong DSN, or a full disk. Escalate to the on-call database engineer when the DSN is correct \
but connections are refused.

Version 2.3.1 changed the default port to 6380. Update firewall rules before upgrading."""

CHINESE = (
    "重启服务之前，请先检查队列深度。如果队列超过一万条，请等待！"
    "然后在密钥库中轮换凭据；最后重启工作进程。确认消息恢复流动了吗？延迟应在五分钟内下降。"
    "\n\n"
    "如果进程无法启动，请查看日志。常见原因是证书过期、连接串错误或磁盘已满。"
)


def words(text: str) -> int:
    return len(text.split())


def chars(text: str) -> int:
    return len(text)


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def check_invariants(text: str, chunks: list[str], max_tokens: int, count: object) -> None:
    assert callable(count)
    normalised = text.replace("\r\n", "\n").strip()
    for chunk in chunks:
        assert chunk
        assert chunk == chunk.strip()
        assert count(chunk) <= max_tokens
        assert chunk in normalised


def test_empty_and_whitespace_give_no_chunks() -> None:
    assert chunk_text("", max_tokens=10, overlap_tokens=0, count_tokens=words) == []
    assert chunk_text(" \n\n\t ", max_tokens=10, overlap_tokens=0, count_tokens=words) == []


def test_small_text_is_one_stripped_chunk() -> None:
    assert chunk_text("  hello world \n", max_tokens=10, overlap_tokens=2,
                      count_tokens=words) == ["hello world"]


@pytest.mark.parametrize(("max_tokens", "overlap"), [(0, 0), (10, 10), (10, -1), (5, 6)])
def test_invalid_budget_raises(max_tokens: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="tokens"):
        chunk_text("a b c", max_tokens=max_tokens, overlap_tokens=overlap, count_tokens=words)


def test_paragraphs_are_preferred_boundaries() -> None:
    paras = [p.strip() for p in RUNBOOK.split("\n\n")]
    biggest = max(words(p) for p in paras)
    chunks = chunk_text(RUNBOOK, max_tokens=biggest, overlap_tokens=0, count_tokens=words)
    # Each paragraph fits alone and no two fit together, so chunks are exactly the paragraphs.
    assert chunks == paras


def test_long_paragraph_splits_at_sentences_not_inside_them() -> None:
    chunks = chunk_text(RUNBOOK, max_tokens=20, overlap_tokens=0, count_tokens=words)
    check_invariants(RUNBOOK, chunks, 20, words)
    assert squash("".join(chunks)) == squash(RUNBOOK)  # nothing lost, nothing doubled
    for chunk in chunks:
        assert chunk.endswith((".", "!", "?", "`", "drain.", "worker", "6380.")), chunk
    assert "Version 2.3.1 changed the default port to 6380." in chunks[-1]  # "2.3.1" not split


def test_overlap_repeats_the_boundary_sentence() -> None:
    chunks = chunk_text(RUNBOOK, max_tokens=30, overlap_tokens=12, count_tokens=words)
    check_invariants(RUNBOOK, chunks, 30, words)
    assert len(set(chunks)) == len(chunks)  # overlap never yields a chunk of old text only
    shared = 0
    for prev, nxt in itertools.pairwise(chunks):
        tail = prev.splitlines()[-1].split(". ")[-1]
        if nxt.startswith(tail):
            shared += 1
    assert shared >= 1


def test_chinese_splits_on_chinese_punctuation() -> None:
    chunks = chunk_text(CHINESE, max_tokens=30, overlap_tokens=0, count_tokens=chars)
    check_invariants(CHINESE, chunks, 30, chars)
    assert squash("".join(chunks)) == squash(CHINESE)
    for chunk in chunks:
        assert chunk[-1] in "。！？；", chunk
    assert "然后在密钥库中轮换凭据；" in "".join(chunks)


def test_chinese_overlap_keeps_whole_sentences() -> None:
    chunks = chunk_text(CHINESE, max_tokens=30, overlap_tokens=12, count_tokens=chars)
    check_invariants(CHINESE, chunks, 30, chars)
    assert any(b.startswith(a[a.rfind("。", 0, len(a) - 1) + 1:])
               for a, b in itertools.pairwise(chunks))


def test_over_long_sentence_is_hard_split_at_whitespace() -> None:
    text = " ".join(f"word{i}" for i in range(50))
    chunks = chunk_text(text, max_tokens=60, overlap_tokens=0, count_tokens=chars)
    check_invariants(text, chunks, 60, chars)
    assert all(re.fullmatch(r"(word\d+ ?)+", c) for c in chunks)  # never mid-word
    assert " ".join(chunks) == text


def test_text_without_any_boundary_is_hard_split_by_characters() -> None:
    text = "长" * 95
    chunks = chunk_text(text, max_tokens=20, overlap_tokens=5, count_tokens=chars)
    assert [len(c) for c in chunks] == [20, 20, 20, 20, 15]


def test_character_larger_than_budget_raises() -> None:
    with pytest.raises(ValueError, match="one character"):
        chunk_text("abc", max_tokens=1, overlap_tokens=0, count_tokens=lambda s: 2 * len(s))


def test_windows_newlines_are_normalised() -> None:
    text = "First para.\r\n\r\nSecond para."
    assert chunk_text(text, max_tokens=2, overlap_tokens=0, count_tokens=words) == [
        "First para.", "Second para."]


def test_random_texts_keep_the_invariants_and_are_deterministic() -> None:
    rng = random.Random(7)
    alphabet = ["alpha", "beta", "长期", "记忆", ".", "。", "!", "；", "\n", "\n\n", " ", "x" * 30]
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        max_tokens = rng.randint(8, 60)
        overlap = rng.randint(0, max_tokens - 1)
        first = chunk_text(text, max_tokens=max_tokens, overlap_tokens=overlap,
                           count_tokens=chars)
        check_invariants(text, first, max_tokens, chars)
        assert first == chunk_text(text, max_tokens=max_tokens, overlap_tokens=overlap,
                                   count_tokens=chars)
        no_overlap = chunk_text(text, max_tokens=max_tokens, overlap_tokens=0,
                                count_tokens=chars)
        assert squash("".join(no_overlap)) == squash(text)
        assert len(first) >= len(no_overlap)  # overlap only ever adds repeated pieces


def test_real_tokenizer_budget_holds() -> None:
    from app.adapters.tokenizers.tiktoken_counter import TiktokenCounter

    count = TiktokenCounter("o200k_base")
    text = (RUNBOOK + "\n\n" + CHINESE + "\n\n") * 6
    chunks = chunk_text(text, max_tokens=64, overlap_tokens=12, count_tokens=count)
    check_invariants(text, chunks, 64, count)
    assert len(chunks) > 6
    assert max(count(c) for c in chunks) > 40  # packing fills chunks, not one sentence each
