"""A learned prompt-injection detector: a linear model over word and CJK-character n-grams.

Contract: ``LearnedInjection(model)`` is a ``Detector`` (``app.core.guards.safety``) that
reports at most one ``injection.learned`` finding (proposed action ``quarantine``): the
span of the highest-scoring window of the text, when that window's score reaches the
model's threshold. It is pure and deterministic: the weights are data (``LinearModel``,
parsed from ``app.core.detectors.injection_weights``, which ``bench/train_injection.py``
writes), nothing is cached between calls.

What it computes, and why it is cheap: the text is lower-cased and cut into tokens (ASCII
words and single CJK characters, ``TOKEN``); every token contributes the weight of its
unigram and of its bigram with the previous token (two dict look-ups, done by ``map`` in C).
A window of ``n`` tokens (``window`` tokens, ``stride`` apart; a shorter text is one window)
scores ``bias + sum / sqrt(2n - 1)``: its features are counted and scaled by the square root
of their number, as in training. Windows keep a long benign document from adding up to a
finding and let one injected paragraph inside it stand out. ~10-30 µs for a paragraph.

Where it applies is the safety guard's and the memory gate's business: the guard applies its
type (``DATA_ONLY``) to third-party data only (untrusted, evidence, inferred content, tool
results), not to a user's own messages or operator instructions, which are instructions by
nature; the write gate holds a flagged statement as a hypothesis instead of storing a fact.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import accumulate, islice, pairwise, repeat

from app.core.guards.safety import LEARNED_INJECTION, Finding

TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?"
                   r"|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
SPAN_CHARS = 20_000  # a longer text's finding spans all of it (see LearnedInjection)
# A longer text is scored on its first and last MAX_CHARS / 2 characters: the cost of a text
# stays bounded (~0.3 s of CPU for adversarial CJK, where every character is a token) and the
# rules still read all of it. No candidate that long fits an envelope whole.
MAX_CHARS = 200_000
Feature = str | tuple[str, str]  # a unigram, or a bigram (previous token, token)


def tokens(text: str) -> list[str]:
    """The model's tokens of ``text`` (training uses this very function)."""
    return TOKEN.findall(text.lower())


def windows(n: int, window: int, stride: int) -> list[tuple[int, int]]:
    """Token ranges ``[a, b)`` scored for a text of ``n`` tokens: one when it fits, else
    ``window``-sized ranges every ``stride`` tokens, the last one ending at ``n``."""
    if n <= window:
        return [(0, n)] if n else []
    starts = list(range(0, n - window, stride))
    return [(a, a + window) for a in starts] + [(n - window, n)]


def window_features(toks: list[str], a: int, b: int) -> list[Feature]:
    """The features of the window ``[a, b)`` (training counts these)."""
    return [*toks[a:b], *zip(toks[a:b - 1], toks[a + 1:b], strict=True)]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearModel:
    bias: float
    threshold: float
    window: int
    stride: int
    weights: Mapping[Feature, float] = field(repr=False)
    digest: str = ""  # of the serialized weights: a stable repr for the findings cache

    def __repr__(self) -> str:
        return (f"LinearModel(bias={self.bias}, threshold={self.threshold}, window="
                f"{self.window}, stride={self.stride}, digest={self.digest!r})")


def parse_model(text: str) -> LinearModel:
    """The model from its serialized form: ``key value`` header lines (bias, threshold,
    window, stride), a blank line, then one ``weight<TAB>token[<TAB>token]`` line per
    feature (two tokens: a bigram)."""
    head, _, body = text.strip().partition("\n\n")
    meta = dict(line.split(" ", 1) for line in head.splitlines())
    weights: dict[Feature, float] = {}
    for line in body.splitlines():
        w, *key = line.split("\t")
        weights[key[0] if len(key) == 1 else (key[0], key[1])] = float(w)
    return LinearModel(bias=float(meta["bias"]), threshold=float(meta["threshold"]),
                       window=int(meta["window"]), stride=int(meta["stride"]), weights=weights,
                       digest=hashlib.sha256(text.encode()).hexdigest()[:16])


def scores(model: LinearModel, toks: list[str]) -> list[tuple[float, int, int]]:
    """``(score, a, b)`` of every window of ``toks``."""
    get, zero = model.weights.get, repeat(0.0)
    uni = list(map(get, toks, zero))
    bi = [0.0, *map(get, pairwise(toks), zero)]  # bi[i]: bigram ending at token i
    cu, cb = [0.0, *accumulate(uni)], [0.0, *accumulate(bi)]
    out = []
    for a, b in windows(len(toks), model.window, model.stride):
        total = cu[b] - cu[a] + cb[b] - cb[a + 1]
        out.append((model.bias + total / math.sqrt(2 * (b - a) - 1), a, b))
    return out


def score(model: LinearModel, text: str) -> float:
    """The highest window score of ``text`` (``-inf`` for a text without tokens)."""
    return max((s for s, _, _ in scores(model, tokens(text))), default=-math.inf)


class LearnedInjection:
    name = LEARNED_INJECTION  # in the safety guard's DATA_ONLY: low-trust content only

    def __init__(self, model: LinearModel) -> None:
        self.model = model

    def __call__(self, text: str) -> list[Finding]:
        if len(text) > MAX_CHARS:  # its head and its tail, each scored alone
            half = MAX_CHARS // 2
            if max(score(self.model, text[:half]), score(self.model, text[-half:])) \
                    < self.model.threshold:
                return []
            return [Finding(type=LEARNED_INJECTION, action="quarantine", start=0, end=len(text))]
        lowered = text.lower()
        toks = TOKEN.findall(lowered)
        best = max(scores(self.model, toks), default=None)
        if best is None or best[0] < self.model.threshold:
            return []
        _, a, b = best
        if len(lowered) != len(text) or len(text) > SPAN_CHARS:
            # offsets unknown (lower-casing changed lengths), or costlier to find than they
            # are worth: the guard quarantines the whole candidate either way
            return [Finding(type=LEARNED_INJECTION, action="quarantine", start=0, end=len(text))]
        found = list(islice(TOKEN.finditer(lowered), a, b))
        return [Finding(type=LEARNED_INJECTION, action="quarantine", start=found[0].start(),
                        end=found[-1].end())]

    def __repr__(self) -> str:  # stable (no address): the findings cache fingerprints it
        return f"LearnedInjection({self.model!r})"
