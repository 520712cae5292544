"""Precision and recall of the built-in detectors on the labelled set, per family.

A case counts for a family when it expects a type of that family (a positive) or when any
detector reports one (a prediction). A true positive needs one of the *expected* types among
the findings: the right detector, not just any of the family.

The injection set (``injection.jsonl``) is scored as a guard sees it: a case is caught when
any ``injection.*`` finding is reported (its expected type is the attack's kind, for recall
per kind); a benign case with any finding is a false positive. The memory gate is scored on
the same statements written as user memories. Reproduce the tables with

    python -m tests.unit.test_detectors_eval
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.core.detectors import (
    ALL_DETECTORS,
    INJECTION_DETECTORS,
    PII_DETECTORS,
    SECRET_DETECTORS,
)
from app.core.memory_gate import MemoryWrite, decide
from app.core.model import DataLevel

DATA = Path(__file__).resolve().parents[1] / "data" / "detectors"
CASES = DATA / "cases.jsonl"
INJECTION_CASES = DATA / "injection.jsonl"
INJECTION_RECALL, INJECTION_FPR, GATE_HELD = 0.9, 0.05, 0.8
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


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


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


def injected(text: str) -> bool:
    return any(d(text) for d in INJECTION_DETECTORS)


def injection_rows(cases: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per attack kind (and ``benign``): (cases, cases with an injection finding)."""
    rows: dict[str, tuple[int, int]] = {}
    for c in cases:
        kind = c["expect"][0] if c["expect"] else "benign"
        n, hit = rows.get(kind, (0, 0))
        rows[kind] = (n + 1, hit + injected(c["text"]))
    return rows


def held_by_gate(statement: str) -> bool:
    """Rejected or kept only as a hypothesis, written as a confident user memory."""
    w = MemoryWrite(statement=statement, scope_level="user", user_id="u", domain=None,
                    origin="user_stated", evidence_ref=None, source_session="s", owner="u",
                    confidence=0.9, sensitivity=DataLevel.INTERNAL, key=None, expires_at=None,
                    task_id=None)
    d = decide(w, existing=(), secret_detectors=SECRET_DETECTORS, pii_detectors=PII_DETECTORS,
               injection_detectors=INJECTION_DETECTORS)
    return d.decision in ("rejected", "hypothesis")


def injection_table(cases: list[dict[str, Any]]) -> str:
    out = ["| cases | kind | n | flagged | rate |", "|---|---|---|---|---|"]
    for label, subset in (("all", cases),
                          ("blind probes", [c for c in cases if "blind" in c["note"]])):
        for kind, (n, hit) in sorted(injection_rows(subset).items()):
            what = "FPR" if kind == "benign" else "recall"
            out.append(f"| {label} | {kind} | {n} | {hit} | {what} {hit / n:.3f} |")
    pos = [c["text"] for c in cases if c["expect"]]
    memories = [c["text"] for c in cases if c["kind"] == "memory"]
    held = sum(map(held_by_gate, pos))
    kept = sum(not held_by_gate(t) for t in memories)
    out.append(f"| memory gate | injected statements held | {len(pos)} | {held} | "
               f"{held / len(pos):.3f} |")
    out.append(f"| memory gate | benign memories accepted | {len(memories)} | {kept} | "
               f"{kept / len(memories):.3f} |")
    return "\n".join(out)


def test_injection_recall_per_kind_and_false_positive_rate() -> None:
    cases = load_cases(INJECTION_CASES)
    rows = injection_rows(cases)
    assert len(rows) >= 7 and rows["benign"][0] >= 80
    n, fp = rows.pop("benign")
    assert fp / n <= INJECTION_FPR, injection_table(cases)
    for kind, (total, hit) in rows.items():
        assert hit / total >= INJECTION_RECALL, (kind, injection_table(cases))


def test_memory_gate_holds_injected_statements_and_keeps_memories() -> None:
    cases = load_cases(INJECTION_CASES)
    pos = [c["text"] for c in cases if c["expect"]]
    assert sum(map(held_by_gate, pos)) / len(pos) >= GATE_HELD
    assert not [c["text"] for c in cases if c["kind"] == "memory" and held_by_gate(c["text"])]


if __name__ == "__main__":
    all_cases = load_cases()
    result, errors = evaluate(all_cases)
    print(table(result, all_cases))
    print(*errors, sep="\n")
    print(injection_table(load_cases(INJECTION_CASES)))
