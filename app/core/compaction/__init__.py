"""Compaction as a transaction: commit the facts, then compress the narrative.

Pure stages (no I/O, no clock), one module each; ``lifecycle`` holds the order:

    prune      (prune.py)      old tool results: soft trim, then hard clear to a handle
    commit     (commit.py)     facts → a new TaskCheckpoint revision (extract.py: the rules)
    compact    (compact.py)    narrative before the recent tail → cited summary (summarize.py)
    rebuild    (rebuild.py)    checkpoint + pins + summary + sticky + tail → View
    validate   (check.py)      goal, constraints verbatim, approvals, evidence refs, and no
                               summary sentence contradicting a constraint
    lifecycle  (lifecycle.py)  compaction_steps / run_compaction, retry with pins, breaker

See docs/compaction.md for the rules, the regression set and the measured numbers.
"""

from app.core.compaction.check import contradictions, validate_compaction
from app.core.compaction.commit import commit
from app.core.compaction.compact import compact, plan_cut
from app.core.compaction.extract import Extraction, Extractor, RuleExtractor
from app.core.compaction.lifecycle import Options, Origin, compaction_steps, run_compaction
from app.core.compaction.prune import prune
from app.core.compaction.rebuild import find_sticky, rebuild, reference_view
from app.core.compaction.summarize import AsyncSummarizer, ExtractiveSummarizer, Summarizer
from app.core.compaction.values import (
    Compaction,
    CompactionCheck,
    CompactionOutcome,
    PruneResult,
    SummaryRequest,
    View,
    ViewItem,
)

__all__ = [
    "AsyncSummarizer",
    "Compaction",
    "CompactionCheck",
    "CompactionOutcome",
    "Extraction",
    "ExtractiveSummarizer",
    "Extractor",
    "Options",
    "Origin",
    "PruneResult",
    "RuleExtractor",
    "Summarizer",
    "SummaryRequest",
    "View",
    "ViewItem",
    "commit",
    "compact",
    "compaction_steps",
    "contradictions",
    "find_sticky",
    "plan_cut",
    "prune",
    "rebuild",
    "reference_view",
    "run_compaction",
    "validate_compaction",
]
