"""Small builders for core unit tests: sensible labelled defaults, override what matters."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.core.model import (
    Acl,
    Budget,
    Candidate,
    Constraint,
    DataLevel,
    Kind,
    Layer,
    Scope,
    Section,
    Segment,
    TaskCheckpoint,
    Trust,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
TENANT = "t_acme"
DISCOUNT = "only before 2026-06-30, channel customers excepted"


def count(text: str) -> int:
    """A deterministic stand-in tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def scope(**over: Any) -> Scope:
    values: dict[str, Any] = {
        "tenant_id": TENANT, "key_id": "key_1", "user_id": "alice",
        "groups": ("payments-oncall",), "domain": "payments", "data_level": DataLevel.INTERNAL,
        "session_id": "sess_1", "task_id": "task_1",
    }
    values.update(over)
    return Scope(**values)


def cand(ref: str = "kb://doc#v1:c1", content: str = "some content", **over: Any) -> Candidate:
    values: dict[str, Any] = {
        "ref": ref, "kind": Kind.RETRIEVAL, "layer": Layer.KNOWLEDGE,
        "section": Section.DYNAMIC, "role": "system", "content": content,
        "tenant_id": TENANT, "origin": "kb://doc", "trust": Trust.REVIEWED,
        "sensitivity": DataLevel.INTERNAL, "acl": Acl(whole_tenant=True),
        "tokens": count(content),
    }
    values.update(over)
    return Candidate(**values)


def words(n: int, word: str = "w") -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def budget(max_tokens: int, reserve_output: int = 0) -> Budget:
    return Budget(max_tokens=max_tokens, reserve_output=reserve_output)


def checkpoint(**over: Any) -> TaskCheckpoint:
    values: dict[str, Any] = {
        "task_id": "task_1", "revision": 3, "user_id": "alice", "session_id": "sess_1",
        "parent_task_id": None, "goal": "Refund order 991 to the original card",
        "constraints": (Constraint(text=DISCOUNT, kind="only"),),
        "pending_approvals": ("finance lead approves refunds above 500 EUR",),
        "verified_evidence": ("gateway log shows timeout after 30s",),
        "next_safe_action": "ask finance for approval",
    }
    values.update(over)
    return TaskCheckpoint(**values)


def segment(c: Candidate, i: int = 1) -> Segment:
    return Segment(id=f"seg_{i}", candidate=c, content=c.content, tokens=c.tokens,
                   content_sha256="x")
