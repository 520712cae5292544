"""The alternative measured against the n-gram model: a logistic-regression head over the
multilingual-e5-small passage vectors the service computes (``E5Embedder.embed_passages``).

Same corpora, folds and threshold rule as ``bench.train_injection``, on a subsample (at most
``CAP`` texts per source and label, each cut to its first ``CHARS`` characters, as the
embedder reads ~512 tokens) so the vectors take minutes, not an hour, on two cores. The
n-gram model is scored on the very same subsample for the comparison.

    python -m bench.injection_e5 --mirror /work/.mirror [--report out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from app.adapters.embedders.e5 import E5Embedder
from app.core.detectors.learned import score
from bench.train_injection import (
    EVAL_ONLY,
    FOLDS,
    SEED,
    Sample,
    load,
    model_of,
    rules,
    threshold_for,
    train,
)

CAP, CHARS = 60, 400
L2 = 1e-3


def subsample(samples: list[Sample]) -> list[Sample]:
    groups: dict[tuple[str, int], list[Sample]] = defaultdict(list)
    for s in samples:
        groups[(s.source, s.label)].append(s)
    rng = random.Random(SEED)
    return [s for key in sorted(groups) for s in rng.sample(groups[key],
                                                            min(CAP, len(groups[key])))]


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Logistic regression, classes weighted equally, full-batch gradient descent."""
    sw = np.where(y == 1, 0.5 / max(y.sum(), 1), 0.5 / max((1 - y).sum(), 1))
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(3000):
        p = 1 / (1 + np.exp(-(x @ w + b)))
        r = (p - y) * sw
        w -= 2.0 * (x.T @ r + L2 * w)
        b -= 2.0 * float(r.sum())
    return w, b


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", type=Path, required=True)
    ap.add_argument("--report", type=Path)
    args = ap.parse_args(argv)
    samples = subsample(load(args.mirror))
    t0 = time.time()
    vectors = np.array(asyncio.run(E5Embedder().embed_passages(
        [s.text[:CHARS] for s in samples])))
    print(f"embedded {len(samples)} in {time.time() - t0:.0f} s", file=sys.stderr)
    y = np.array([s.label for s in samples], dtype=float)
    src = [s.source for s in samples]
    dense, ngram = np.zeros(len(samples)), np.zeros(len(samples))
    trainable = np.array([s not in EVAL_ONLY for s in src])
    for fold in (*FOLDS, EVAL_ONLY):
        test = np.array([s in fold for s in src])
        tr = trainable & ~test
        w, b = fit(vectors[tr], y[tr])
        dense[test] = vectors[test] @ w + b
        bias, weights = train([s for s, keep in zip(samples, tr, strict=True) if keep])
        model = model_of(bias, weights, 0.0)
        ngram[test] = [score(model, s.text) for s, t in zip(samples, test, strict=True) if t]
    held = trainable
    out: dict[str, object] = {"n": len(samples)}
    ruled = np.array([rules(s.text) for s in samples])
    for name, sc in (("e5_head", dense), ("ngram", ngram)):
        th = threshold_for(list(sc[held & (y == 0)]))
        hit = sc >= th
        out[name] = {
            "heldout_recall": round(float(hit[held & (y == 1)].mean()), 3),
            "heldout_fpr": round(float(hit[held & (y == 0)].mean()), 3),
            "heldout_recall_or_rules": round(float((hit | ruled)[held & (y == 1)].mean()), 3),
            "tensortrust_recall": round(float(hit[~held].mean()), 3),
            "own_recall": round(float(hit[np.array(src) == "own"][
                y[np.array(src) == "own"] == 1].mean()), 3)}
    print(json.dumps(out, indent=1))
    if args.report:
        args.report.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
