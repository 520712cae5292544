"""Recall per kind of secret and false-positive rate on hard negatives, for the secret detectors.

Set: ``tests/data/detectors/secrets.jsonl``. Positives (``expect: ["secret"]``) hold one
credential each, made up for this set in a format its provider documents, inside a config,
env, shell, log, chat or code snippet; ``kind`` names the credential (``slack_refresh``,
``box``, ``password``...). Negatives (``kind: negative.*``) are hard ones: git SHAs, digests,
lockfile integrity hashes, UUIDs and API object ids, base64 images, certificates, SSH public
keys, placeholders (``xoxb-xxxx``, ``<YOUR_API_KEY>``, AWS's documented EXAMPLE keys),
scanner baselines (``hashed_secret``), password hashes, empty values, code. A positive is
caught when any ``secret.*`` finding is reported on it; a negative is a false positive when
any is. Reproduce the table with

    python -m tests.unit.test_secrets_eval

The same cases check that a dropped secret leaves no trace of its value in what the guard
returns (drop records: type and reason), which is what manifests and the audit log store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.core.detectors import ALL_DETECTORS, SECRET_DETECTORS
from app.core.detectors.prefilter import Prefiltered
from app.core.guards.safety import safety_guard
from tests.unit.builders import cand, count, scope

CASES = Path(__file__).resolve().parents[1] / "data" / "detectors" / "secrets.jsonl"
RECALL, FPR = 0.95, 0.03  # the whole set
KIND_RECALL = 0.6  # every kind: hex keys with no name before them are unrecognisable
SCAN = Prefiltered(SECRET_DETECTORS)


def load() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines() if line]


def rows(cases: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per kind: (cases, cases with a secret finding)."""
    out: dict[str, tuple[int, int]] = {}
    for c in cases:
        n, hit = out.get(c["kind"], (0, 0))
        out[c["kind"]] = (n + 1, hit + bool(SCAN(c["text"])))
    return out


def totals(table: dict[str, tuple[int, int]]) -> tuple[float, float]:
    pos = [v for k, v in table.items() if not k.startswith("negative")]
    neg = [v for k, v in table.items() if k.startswith("negative")]
    return (sum(h for _, h in pos) / sum(n for n, _ in pos),
            sum(h for _, h in neg) / sum(n for n, _ in neg))


def render(cases: list[dict[str, Any]]) -> str:
    lines = []
    for label, subset in (("all", cases),
                          ("blind probe 2", [c for c in cases if c["note"] == "blind probe 2"])):
        table = rows(subset)
        recall, fpr = totals(table)
        lines.append(f"{label}: {len(subset)} cases, recall {recall:.3f}, FPR {fpr:.3f}")
    lines += ["", "| kind | n | flagged | rate |", "|---|---|---|---|"]
    for kind, (n, hit) in sorted(rows(cases).items()):
        what = "FPR" if kind.startswith("negative") else "recall"
        lines.append(f"| {kind} | {n} | {hit} | {what} {hit / n:.2f} |")
    return "\n".join(lines)


def test_set_is_large_and_mixed() -> None:
    cases = load()
    assert len({c["id"] for c in cases}) == len(cases) >= 450
    kinds = {c["kind"] for c in cases}
    assert sum(not k.startswith("negative") for k in kinds) >= 50
    assert sum(k.startswith("negative") for k in kinds) >= 20
    assert {c["lang"] for c in cases} == {"en", "zh"}


def test_recall_and_false_positive_rate() -> None:
    cases = load()
    table = rows(cases)
    recall, fpr = totals(table)
    assert recall >= RECALL and fpr <= FPR, render(cases)
    weak = {k: v for k, v in table.items()
            if not k.startswith("negative") and v[1] / v[0] < KIND_RECALL}
    assert not weak, render(cases)


def test_prefiltered_scan_finds_what_the_detectors_find() -> None:
    for c in load():
        assert SCAN(c["text"]) == [f for d in SECRET_DETECTORS for f in d(c["text"])], c["id"]


def test_dropped_secrets_leave_no_value_in_drop_records() -> None:
    for c in load():
        values = [c["text"][f.start:f.end] for f in SCAN(c["text"])]
        if not c["expect"] or not values:
            continue
        kept, dropped = safety_guard(scope(), [cand(c["id"], content=c["text"])],
                                     detectors=ALL_DETECTORS, count_tokens=count)
        assert not kept and len(dropped) == 1, c["id"]
        record = repr(dropped[0])
        assert not [v for v in values if v in record], c["id"]


if __name__ == "__main__":
    print(render(load()))
