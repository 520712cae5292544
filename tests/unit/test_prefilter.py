"""The prefilter changes how fast the detectors run, never what they find.

Soundness is checked at two levels on the labelled detector cases and variants of them that
stress what a byte scanner could get wrong (upper case, Unicode spaces, CJK around the text):
every pattern match satisfies every factor read off that pattern, and the prefiltered
detector returns exactly the findings of running every detector — with Hyperscan and with
the pure-Python scan.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.core.compaction import text as tx
from app.core.detectors import ALL_DETECTORS, LEARNED_DETECTORS
from app.core.detectors.base import PatternDetector, fold_ascii
from app.core.detectors.confusables import canonical
from app.core.detectors.injection import INJECTION
from app.core.detectors.literals import caseless, required_factors
from app.core.detectors.obfuscation import OBFUSCATED, Deobfuscated
from app.core.detectors.prefilter import HAVE_HYPERSCAN, Prefiltered, pattern_factors
from app.core.detectors.secrets import BARE_TOKEN
from app.core.guards.safety import Finding

CASES = Path(__file__).resolve().parents[1] / "data" / "detectors" / "cases.jsonl"


def _variants(text: str) -> list[str]:
    return [text, text.upper(), text.title(), text.replace(" ", "\u3000"),
            text.replace(" ", "\xa0\t"), f"日志：{text}。\n{text[::-1]}"]


TEXTS = [v for line in CASES.read_text(encoding="utf-8").splitlines() if line
         for v in _variants(json.loads(line)["text"])]
SCANS = [pytest.param(True, id="hyperscan"), pytest.param(False, id="python")]


# the injection family runs as one CanonicalText detector: check its members one by one
# (the obfuscation reader runs the injection family again on rewritten text: its patterns
# are the family's own, listed once)
PATTERN_DETECTORS = [m for d in ALL_DETECTORS if not isinstance(d, Deobfuscated)
                     for m in getattr(d, "members", (d,))]
(LEARNED,) = LEARNED_DETECTORS


def _plain(text: str) -> list[Finding]:
    return [f for d in ALL_DETECTORS for f in d(text)]


def _key(f: Finding) -> tuple[str, int, int]:
    return f.type, f.start, f.end


def test_canonical_family_finds_what_its_members_find() -> None:
    for text in TEXTS:
        canon, _ = canonical(text)
        members = [f for m in INJECTION.members for f in m(canon)]
        assert sorted(INJECTION(text), key=_key) == sorted(members, key=_key), text


@pytest.mark.parametrize("use_hyperscan", SCANS)
def test_same_findings_as_running_every_detector(use_hyperscan: bool) -> None:
    if use_hyperscan and not HAVE_HYPERSCAN:
        pytest.skip("no hyperscan wheel on this platform")
    pf = Prefiltered(ALL_DETECTORS, use_hyperscan=use_hyperscan)
    for text in TEXTS:
        assert pf(text) == _plain(text), text


def test_every_match_contains_each_factor_of_its_pattern() -> None:
    checked = 0
    for d in PATTERN_DETECTORS:
        if not isinstance(d, PatternDetector):
            continue
        for pattern, factors in zip(d.patterns, pattern_factors(d) or [], strict=True):
            for text in TEXTS:
                if pattern.search(fold_ascii(text) if d.fold else text) is None:
                    continue
                checked += 1
                haystack = fold_ascii(text) if d.fold else text
                for f in factors:
                    wanted = {fold_ascii(s) for s in f} if d.fold else f
                    assert any(s in haystack for s in wanted), (d.name, pattern.pattern, text)
    assert checked > 200


def test_both_scans_see_the_same_literals() -> None:
    if not HAVE_HYPERSCAN:
        pytest.skip("no hyperscan wheel on this platform")
    fast, slow = Prefiltered(ALL_DETECTORS), Prefiltered(ALL_DETECTORS, use_hyperscan=False)
    for text in TEXTS:
        assert fast.present(text) == slow.present(text), text


def test_every_builtin_detector_is_filtered() -> None:
    """A pattern the reader cannot see into would run on every text: make that visible."""
    assert Prefiltered(PATTERN_DETECTORS).unfiltered == (BARE_TOKEN.name, LEARNED.name)
    # both filter inside: the injection scanner by its own literals, the bare-token scanner by
    # one linear pass for 20+ character runs (a generated token has no word to look for); the
    # learned injection model scores every text (one pass of dict look-ups, no literal to need);
    # the obfuscation reader gates itself (a separator-led search, leet words read back and
    # scanned again only when they bring out a keyword the text did not hold)
    assert set(Prefiltered(ALL_DETECTORS).unfiltered) == {INJECTION.name, BARE_TOKEN.name,
                                                          LEARNED.name, OBFUSCATED}


def test_a_text_without_triggers_runs_no_pattern() -> None:
    calls: list[str] = []

    def accept(m: re.Match[str], _text: str) -> bool:
        calls.append(m.group())
        return True

    det = PatternDetector(name="t", type="secret.t", action="drop", accept=accept,
                          patterns=(re.compile(r"x{0,3}hunter\s{1,2}2"),))
    pf = Prefiltered([det])
    assert pf("nothing to see here, hunter2 or hunter3") == []
    assert calls == []  # "hunter" occurs, "hunter" + a space + "2" does not: no regex ran
    assert pf("restart nginx; hunter\n\n2") == [
        Finding(type="secret.t", action="drop", start=15, end=24)]
    assert calls == ["hunter\n\n2"]


@pytest.mark.parametrize(("pattern", "expected"), [
    (r"post\s{1,3}data", [{"post" + s for s in ("\t", " ", "\u3000")}, {"data"}]),
    (r"(?:sk|rk)_(?:live|test)_x", [{"sk_live_x", "rk_live_x", "sk_test_x", "rk_test_x"}]),
    (r"e-?mail\b", [{"email", "e-mail"}]),
    (r"(?:ab|cd\d)ef", [{"ab", "cd"}, {"ef"}]),
    (r"(?:x)?y{0,2}", []),
    (r"[hH][tT]tps?://", [{"http://", "HTtps://", "hTtp://", "Https://", "https://"}]),
])
def test_factors_read_off_a_pattern(pattern: str, expected: list[set[str]]) -> None:
    got = required_factors(re.compile(pattern))
    assert len(got) == len(expected)
    for f, want in zip(got, expected, strict=True):
        assert want <= f if len(want) < len(f) else f == want


def test_ignorecase_patterns_have_no_factors() -> None:
    # re.IGNORECASE matches "K" (Kelvin sign) for "k": no byte literal would see it
    assert re.search(r"key", "\u212aey", re.IGNORECASE)
    assert required_factors(re.compile(r"key", re.IGNORECASE)) == ()


def test_caseless_folds_every_letter_ignorecase_equates_with_ascii() -> None:
    letter = re.compile("[a-z]", re.IGNORECASE)
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        if letter.fullmatch(ch):
            folded = caseless(ch)
            assert len(folded) == 1 and folded.isascii(), repr(ch)
            assert re.fullmatch(folded, ch, re.IGNORECASE), repr(ch)


def test_cues_answer_as_their_patterns() -> None:
    cues = [cue for _, cue in tx.QUALIFIERS] + [
        tx.NEGATION, tx.APPROVAL, tx.GRANT, tx.DECISION, tx.SUPERSEDE, tx.EVIDENCE,
        tx.FAILURE, tx.QUESTION, tx.NEXT_ACTION, tx.EFFECT_VERB]
    sentences = [s for text in TEXTS for s in tx.sentences(text)] + [
        "Tests FAILED", "tests Failed", "ONLY refunds under $50", "ſo it is not Only",
        "İNSTEAD we ship", "we will go with plan B", "awaiting finance sign-off",
        "Deployed #INC-42", "下一步：回滚", "commit 0a1b2c3d passed", "nо (Cyrillic o) limit"]
    for cue in cues:
        assert cue._factors, cue.pattern.pattern  # every cue has literals to gate on
        for s in sentences:
            assert (cue.search(s) is None) == (cue.pattern.search(s) is None), (cue.pattern, s)
        for text in [*TEXTS, " ".join(sentences)]:  # a whole text that cannot match has no
            if not cue.may_occur(text):              # sentence that can
                assert not any(cue.pattern.search(s) for s in tx.sentences(text)), cue.pattern
