"""OpenAIChatSummarizer against a small local server speaking the chat-completions protocol."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from app.adapters.summarizers.openai_chat import OpenAIChatSummarizer
from app.core.compaction import ExtractiveSummarizer, Origin, SummaryRequest
from app.core.model import Constraint, SessionEvent
from app.ports import SummarizerError
from app.service.compaction import arun_compaction
from tests.local_http import JsonHandler, serve

QUALIFIER = "The discount applies only before 2026-06-30, channel customers excepted."


class FakeChat(JsonHandler):
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeChat.seen.append({"path": self.path, "auth": self.headers.get("Authorization"),
                              **body})
        model = body["model"]
        if model == "boom":
            return self.send_json(503, {"error": {"message": "overloaded"}})
        if model == "slow":
            threading.Event().wait(1.0)
        docs: dict[str, Any] = {
            "nochoices": {"object": "chat.completion"},
            "empty": {"choices": [{"message": {"role": "assistant", "content": "  "}}]},
            "cut": {"choices": [{"finish_reason": "length", "message": {"content": "par"}}]},
        }
        if model == "notjson":
            return self.send_json(200, None)
        user = body["messages"][1]["content"]
        echo = next(line[2:].split("] ", 1)[1] for line in user.splitlines()
                    if line.startswith("- ["))  # the first constraint, verbatim
        ok = {"choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": echo}}]}
        return self.send_json(200, docs.get(model, ok))


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(FakeChat) as base:
        yield base


def request() -> SummaryRequest:
    events = (SessionEvent(seq=3, type="message", role="user", content=f"Clause: {QUALIFIER}"),)
    return SummaryRequest(session_id="s1", events=events, pinned=("pin me",),
                          constraints=(Constraint(text=QUALIFIER, kind="except",
                                                  source_ref="session://s1/events/3"),))


async def test_summarizes_with_verbatim_prompt_and_auth(url: str) -> None:
    s = OpenAIChatSummarizer(url + "/", "sk-test", "ok")
    try:
        got = await s.summarize(request())
    finally:
        await s.aclose()
    last = FakeChat.seen[-1]
    assert got.startswith(QUALIFIER)
    assert last["path"] == "/v1/chat/completions" and last["auth"] == "Bearer sk-test"
    assert last["temperature"] == 0 and "VERBATIM" in last["messages"][0]["content"]
    user = last["messages"][1]["content"]
    assert QUALIFIER in user and "pin me" in user and "[session://s1/events/3]" in user


@pytest.mark.parametrize(("model", "message", "reason"), [
    ("boom", "HTTP 503: .*overloaded", "http_status"),
    ("nochoices", "no 'choices'", "bad_response"),
    ("empty", "no message content", "bad_response"), ("cut", "truncated", "bad_response"),
    ("notjson", "not JSON", "bad_response")])
async def test_errors_are_summarizer_errors(url: str, model: str, message: str,
                                            reason: str) -> None:
    s = OpenAIChatSummarizer(url, "sk-test", model)
    try:
        with pytest.raises(SummarizerError, match=message) as err:
            await s.summarize(request())
    finally:
        await s.aclose()
    assert "sk-test" not in str(err.value)
    assert err.value.reason == reason


async def test_timeout_and_unreachable(url: str) -> None:
    s = OpenAIChatSummarizer(url, None, "slow", timeout_s=0.2)
    try:
        with pytest.raises(SummarizerError, match="timed out") as err:
            await s.summarize(request())
        assert err.value.reason == "timeout"
    finally:
        await s.aclose()
    dead = OpenAIChatSummarizer("http://127.0.0.1:9", None, "ok", timeout_s=1)
    try:
        with pytest.raises(SummarizerError, match="failed: ConnectError") as refused:
            await dead.summarize(request())
        assert refused.value.reason == "unreachable"
    finally:
        await dead.aclose()


async def test_async_lifecycle_with_http_summarizer(url: str) -> None:
    events = [SessionEvent(seq=0, type="message", role="user", content="Answer pricing."),
              SessionEvent(seq=1, type="message", role="user", content=QUALIFIER)]
    events += [SessionEvent(seq=i, type="message", role="user" if i % 2 else "assistant",
                            content=f"filler {i} " * 20) for i in range(2, 40)]
    s = OpenAIChatSummarizer(url, None, "ok")
    try:
        out = await arun_compaction(events, None, origin=Origin(session_id="s1"),
                                    budget_tokens=300, keep_recent=4, summarizer=s,
                                    count_tokens=lambda t: len(t) // 4)
    finally:
        await s.aclose()
    assert out.action == "compaction.completed" and QUALIFIER in out.view.of_kind("summary")
    assert ExtractiveSummarizer().summarize(request())  # the offline default needs no server
