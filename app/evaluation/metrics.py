"""The seeds' section-seven metrics, computed from what the API answered (no model, no I/O).

Each metric is defined in docs/eval.md. Per step, ``score`` turns one observed answer and its
expectations into checks (pass/fail lines for the report) and metric samples; ``aggregate``
pools the samples of many steps. A sample is (numerator, denominator), pooled by summing both,
so a turn with ten relevant refs weighs ten times a turn with one (micro-averaging), and a
metric with no samples is ``None`` (not observed), never 0 or 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from app.evaluation.suite import Expect

# segments that come from a search (ranked), as opposed to the turn, the task or the bundle
RETRIEVED_KINDS = frozenset({"retrieval", "memory", "session", "tool_result"})

# metric -> True when larger is better (compare uses it to name a regression)
HIGHER_IS_BETTER: dict[str, bool] = {
    "recall_at_k": True,
    "mrr": True,
    "citation_precision": True,
    "freshness_error": False,
    "privacy_leakage_rate": False,
    "context_usefulness": True,
    "noise_ratio": False,
    "compaction_fidelity": True,
    "memory_write_precision": True,
    "case_pass_rate": True,
}


@dataclass(frozen=True, slots=True)
class Segment:
    ref: str
    kind: str
    tokens: int
    content: str
    origin: str = ""  # the manifest's: the event a memory was made from, a chunk's document


@dataclass(frozen=True, slots=True)
class Answer:
    """What one step's call returned, reduced to what the metrics read."""

    status: int
    text: str  # the whole response body: leakage is looked for everywhere in it
    segments: tuple[Segment, ...] = ()  # the envelope's, in order (context turns only)
    manifest_refs: tuple[str, ...] = ()  # every ref the manifest names, kept or dropped
    total_tokens: int | None = None
    decision: str | None = None  # a memory write's


@dataclass(slots=True)
class Scored:
    checks: list[tuple[str, bool]] = field(default_factory=list)
    samples: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(ok for _, ok in self.checks)

    def add(self, metric: str, num: float, den: float) -> None:
        if den:
            n, d = self.samples.get(metric, (0.0, 0.0))
            self.samples[metric] = (n + num, d + den)


def _matches(ref: str, prefixes: Iterable[str]) -> bool:
    """``kb://doc-a`` matches itself, ``kb://doc-a#v1:c0`` and ``kb://doc-a/...``, never
    ``kb://doc-ab``."""
    return any(ref == p or ref.startswith((p + "#", p + "/", p + ":")) for p in prefixes)


def _cites(segment: Segment, prefixes: Sequence[str]) -> bool:
    """The segment is, or was made from (a memory's evidence event), one of ``prefixes``."""
    return _matches(segment.ref, prefixes) or bool(
        segment.origin and _matches(segment.origin, prefixes))


def _rank(segments: Sequence[Segment], want: str) -> int | None:
    retrieved = [s for s in segments if s.kind in RETRIEVED_KINDS]
    for i, s in enumerate(retrieved, 1):
        if _cites(s, [want]):
            return i
    return None


def score(expect: Expect, answer: Answer, *, k: int, after_compaction: bool = False) -> Scored:
    """Checks and metric samples for one step. Contract: pure; ``answer.segments`` are in
    envelope order, in which the retrieved ones follow the pipeline's relevance order."""
    out = Scored()
    if expect.status is None:
        out.checks.append((f"status {answer.status} is 2xx", 200 <= answer.status < 300))
    else:
        out.checks.append((f"status {answer.status} == {expect.status}",
                           answer.status == expect.status))
    refs = [s.ref for s in answer.segments]
    for want in expect.must_include:
        out.checks.append((f"includes {want}", any(_matches(r, [want]) for r in refs)))
    for banned in expect.must_exclude:
        seen = [r for r in (*refs, *answer.manifest_refs) if _matches(r, [banned])]
        out.checks.append((f"never names {banned}", not seen))
    envelope = "\n".join(s.content for s in answer.segments)
    for text in expect.must_contain:
        out.checks.append((f"holds {text!r}", text in envelope))
    leaked = [c for c in expect.canaries if c in answer.text]
    for c in expect.canaries:
        out.checks.append((f"does not leak {c!r}", c not in leaked))
    out.add("privacy_leakage_rate", len(leaked), len(expect.canaries))
    if expect.max_tokens is not None and answer.total_tokens is not None:
        out.checks.append((f"{answer.total_tokens} tokens <= {expect.max_tokens}",
                           answer.total_tokens <= expect.max_tokens))
    if expect.decision is not None:
        out.checks.append((f"decision {answer.decision} == {expect.decision}",
                           answer.decision == expect.decision))
        if answer.decision in ("accepted", "superseded"):  # written: was it right to write?
            out.add("memory_write_precision", expect.decision in ("accepted", "superseded"), 1)
    if answer.segments or expect.relevant:
        _retrieval_samples(out, expect, answer.segments, k=k)
    if expect.stale:
        out.add("freshness_error", any(_cites(s, expect.stale) for s in answer.segments), 1)
    if after_compaction and expect.must_contain:
        out.add("compaction_fidelity", sum(t in envelope for t in expect.must_contain),
                len(expect.must_contain))
    return out


def _retrieval_samples(out: Scored, expect: Expect, segments: Sequence[Segment], *,
                       k: int) -> None:
    if expect.relevant:
        ranks = [_rank(segments, r) for r in expect.relevant]
        out.add("recall_at_k", sum(r is not None and r <= k for r in ranks), len(ranks))
        first = min((r for r in ranks if r is not None), default=None)
        out.add("mrr", 1.0 / first if first else 0.0, 1)
        cited = [s for s in segments if s.kind in RETRIEVED_KINDS]
        out.add("citation_precision", sum(_cites(s, expect.relevant) for s in cited),
                len(cited))
        wanted = [*expect.relevant, *expect.must_include]
        noise = sum(s.tokens for s in cited if not _cites(s, wanted)
                    and not any(t in s.content for t in expect.must_contain))
        out.add("noise_ratio", noise, sum(s.tokens for s in cited))
    needed = [*expect.relevant, *expect.must_include]
    if needed or expect.must_contain:
        envelope = "\n".join(s.content for s in segments)
        present = sum(any(_cites(s, [n]) for s in segments) for n in needed)
        present += sum(t in envelope for t in expect.must_contain)
        out.add("context_usefulness", present, len(needed) + len(expect.must_contain))


def aggregate(samples: Iterable[dict[str, tuple[float, float]]]) -> dict[str, float | None]:
    pooled: dict[str, list[float]] = {m: [0.0, 0.0] for m in HIGHER_IS_BETTER}
    for s in samples:
        for metric, (num, den) in s.items():
            pooled[metric][0] += num
            pooled[metric][1] += den
    return {m: (round(n / d, 4) if d else None) for m, (n, d) in pooled.items()}
