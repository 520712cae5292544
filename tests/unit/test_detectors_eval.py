"""Precision and recall of the built-in detectors on the labelled set, per family.

A case counts for a family when it expects a type of that family (a positive) or when any
detector reports one (a prediction). A true positive needs one of the *expected* types among
the findings: the right detector, not just any of the family. Reproduce the table with

    python -m tests.unit.test_detectors_eval
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.core.detectors import ALL_DETECTORS

CASES = Path(__file__).resolve().parents[1] / "data" / "detectors" / "cases.jsonl"
FAMILIES = ("secret", "pii", "injection")
THRESHOLDS = {"secret": (0.95, 0.9), "pii": (0.95, 0.9), "injection": (0.95, 0.9)}


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


def load_cases() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines() if line]


def found_types(text: str) -> set[str]:
    return {f.type for d in ALL_DETECTORS for f in d(text)}


def _family(type_: str) -> str:
    return type_.split(".", 1)[0]


def evaluate(cases: list[dict[str, Any]]) -> tuple[dict[str, Score], list[str]]:
    """Scores per family and one line per mistake (for the failure message)."""
    scores = {f: Score() for f in FAMILIES}
    mistakes: list[str] = []
    for case in cases:
        found = found_types(case["text"])
        for fam in FAMILIES:
            expected = {t for t in case["expect"] if _family(t) == fam}
            predicted = {t for t in found if _family(t) == fam}
            if expected and expected & predicted:
                scores[fam].tp += 1
            elif expected:
                scores[fam].fn += 1
                mistakes.append(f"FN {case['id']} {fam}: {case['text'][:70]!r} got {sorted(found)}")
            elif predicted:
                scores[fam].fp += 1
                mistakes.append(f"FP {case['id']} {fam}: {case['text'][:70]!r} got {sorted(found)}")
    return scores, mistakes


def table(scores: dict[str, Score], cases: list[dict[str, Any]]) -> str:
    rows = ["| family | cases with the family | TP | FP | FN | precision | recall |",
            "|---|---|---|---|---|---|---|"]
    for fam, s in scores.items():
        n = sum(any(_family(t) == fam for t in c["expect"]) for c in cases)
        rows.append(f"| {fam} | {n} | {s.tp} | {s.fp} | {s.fn} | {s.precision:.3f} "
                    f"| {s.recall:.3f} |")
    return "\n".join(rows)


def test_labelled_set_is_large_and_covers_every_type() -> None:
    cases = load_cases()
    assert len(cases) >= 150
    assert len({c["id"] for c in cases}) == len(cases)
    expected = {t for c in cases for t in c["expect"]}
    names = {f.type for d in ALL_DETECTORS for f in d(" ".join(c["text"] for c in cases))}
    assert expected <= names
    for fam in FAMILIES:
        assert sum(not any(_family(t) == fam for t in c["expect"]) for c in cases) > 0
    assert {c["lang"] for c in cases} == {"en", "zh"}


@pytest.mark.parametrize("family", FAMILIES)
def test_precision_and_recall_per_family(family: str) -> None:
    scores, mistakes = evaluate(load_cases())
    precision, recall = THRESHOLDS[family]
    s = scores[family]
    detail = "\n".join(m for m in mistakes if f" {family}:" in m)
    assert s.precision >= precision, detail
    assert s.recall >= recall, detail


if __name__ == "__main__":
    all_cases = load_cases()
    result, errors = evaluate(all_cases)
    print(table(result, all_cases))
    print(*errors, sep="\n")
