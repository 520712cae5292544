"""Drive the pure compaction lifecycle with a network summarizer (the awaiting lives here,
in the shell, so the core stays synchronous)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.compaction import AsyncSummarizer, CompactionOutcome, compaction_steps
from app.core.model import SessionEvent, TaskCheckpoint


async def arun_compaction(events: Sequence[SessionEvent], checkpoint: TaskCheckpoint | None, *,
                          summarizer: AsyncSummarizer, **kwargs: Any) -> CompactionOutcome:
    """``run_compaction`` with an awaited summarizer (HTTP models); same stages, same rules."""
    steps = compaction_steps(events, checkpoint, **kwargs)
    try:
        request = next(steps)
        while True:
            request = steps.send(await summarizer.summarize(request))
    except StopIteration as stop:
        outcome: CompactionOutcome = stop.value
        return outcome
