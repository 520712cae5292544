"""External ids: the validation rule, the one escaping, refs and Redis keys built from them."""

from __future__ import annotations

import itertools
import re

import pytest

from app.adapters.redis.keys import check_prefix, namespace, replay_key, session_key, tail_key
from app.core import refs
from app.core.compaction.text import REF
from app.core.ids import escape_segment, normalize_id, unescape_segment
from tests.nasty_ids import NASTY_IDS, NFC_E, NFD_E

SEGMENT = re.compile(r"[A-Za-z0-9._~%-]+")


@pytest.mark.parametrize("value", NASTY_IDS)
def test_every_nasty_id_is_an_id_kept_as_given(value: str) -> None:
    assert normalize_id(value) == value


def test_ids_are_nfc_and_look_alikes_stay_apart() -> None:
    assert normalize_id(NFD_E) == NFC_E
    assert normalize_id(f"caf{NFD_E}") == f"caf{NFC_E}"
    assert normalize_id("\u0430lice") != normalize_id("alice")
    assert normalize_id("x" * 255 + NFD_E) == "x" * 255 + NFC_E  # the limit counts NFC


@pytest.mark.parametrize(("value", "why"), [
    ("", "1..256"), ("x" * 257, "1..256"), ("a\x00b", "NUL"), ("a\x07b", "U+0007"),
    ("a\nb", "U+000A"), ("a\tb", "U+0009"), ("a\x7fb", "U+007F"), ("a\u200bb", "U+200B"),
    ("a\u202eb", "U+202E"), ("a\u2028b", "U+2028"), ("a\u00a0b", "U+00A0"),
    ("a\ud800", "U+D800"), ("a\ue000", "U+E000"), (" a", "whitespace"), ("a ", "whitespace"),
])
def test_what_is_not_an_id(value: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        normalize_id(value)


def test_escaping_is_injective_reversible_and_inert() -> None:
    escaped = {escape_segment(v) for v in NASTY_IDS}
    assert len(escaped) == len(NASTY_IDS)
    for value in NASTY_IDS:
        seg = escape_segment(value)
        assert unescape_segment(seg) == value
        assert SEGMENT.fullmatch(seg), seg  # no separator, glob, hash tag or space survives
    for plain in ("sess_alice_014", "t-main", "v1.2", "doc~1"):
        assert escape_segment(plain) == plain  # plain ids read as themselves


@pytest.mark.parametrize("value", NASTY_IDS)
def test_refs_parse_back_to_their_ids(value: str) -> None:
    assert refs.parse_ref(refs.doc_ref(value)) == ("kb", (value,))
    assert refs.parse_ref(refs.chunk_ref(value, value, 3)) == ("kb", (value, f"v{value}", "c3"))
    assert refs.parse_ref(refs.session_ref(value)) == ("session", (value,))
    assert refs.parse_ref(refs.event_ref(value, 7)) == ("session", (value, "events", "7"))
    assert refs.event_seq(refs.event_ref(value, 7)) == 7
    assert REF.fullmatch(refs.event_ref(value, 7))  # the compaction's citation pattern
    assert refs.event_seq(refs.compaction_ref(value, "cmp_1")) is None
    assert refs.parse_ref(refs.summary_ref(value)) == ("session", (value, "summary"))
    assert refs.parse_ref(refs.checkpoint_ref(value, 2, "core")) == (
        "task", (value, "checkpoint", "2", "core"))
    assert refs.parse_ref(refs.task_ref(value)) == ("task", (value,))
    assert refs.parse_ref(refs.bundle_ref(value, value)) == ("bundle", (value, value))
    assert refs.parse_ref(refs.memory_ref(value, 4)) == ("mem", (value, "v4"))


def test_no_id_forges_another_ids_ref() -> None:
    builders = (refs.doc_ref, refs.session_ref, refs.task_ref,
                lambda v: refs.event_ref(v, 1), lambda v: refs.chunk_ref(v, "1", 0),
                lambda v: refs.bundle_ref(v, "r1"))
    for build in builders:
        built = [build(v) for v in NASTY_IDS]
        assert len(set(built)) == len(built)
    # An id shaped like a ref's tail stays inside its segment.
    assert refs.event_seq(refs.session_ref("s-main/events/1")) is None
    assert refs.event_ref("s-main/events/1", 2) != refs.event_ref("s-main", 1)


def test_plain_refs_read_as_before() -> None:
    assert refs.chunk_ref("runbook", "3", 2) == "kb://runbook#v3:c2"
    assert refs.event_ref("s1", 4) == "session://s1/events/4"
    assert refs.checkpoint_ref("t1", 2, "core") == "task://t1/checkpoint/2#core"
    assert refs.memory_ref("mem_1", 1) == "mem://mem_1@v1"


def test_not_a_ref() -> None:
    with pytest.raises(ValueError, match="not a ref"):
        refs.parse_ref("pinned")


def test_redis_keys_never_collide_across_tenants_and_sessions() -> None:
    pairs = list(itertools.product(NASTY_IDS, repeat=2))
    tails = [tail_key("ctxgate", t, s) for t, s in pairs]
    assert len(set(tails)) == len(pairs)
    replays = {replay_key("ctxgate", t, s) for t, s in pairs}
    assert len(replays) == len(pairs) and not replays & set(tails)
    for key in tails:
        assert len(key.split(":")) == 6  # ctxgate:t:<tenant>:{s:<session>}:tail
        assert not set(key) & set("*?[]\\ ")
        # One hash tag, the session's own: ids never open or close one.
        assert key.count("{") == key.count("}") == 1 and ":{s:" in key
    for tenant in NASTY_IDS:
        ns = namespace("ctxgate", tenant)
        others = [k for (t, _), k in zip(pairs, tails, strict=True) if t != tenant]
        assert not any(k.startswith(ns) for k in others)  # a SCAN of one tenant's keys
    assert session_key("p", "t", "a:b", "pins") != session_key("p", "t", "a", "b:pins")


def test_keys_refuse_empty_ids_and_bad_prefixes() -> None:
    with pytest.raises(ValueError, match="empty"):
        tail_key("p", "", "s")
    for prefix in ("", "a*", "a{b}", "a b", "a?", "a[1]"):
        with pytest.raises(ValueError, match="prefix"):
            check_prefix(prefix)
    assert check_prefix("ctxgate:prod") == "ctxgate:prod"
