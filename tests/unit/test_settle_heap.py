"""The server freezes what startup built and raises the collection thresholds."""

from __future__ import annotations

import gc

from app.main import GC_THRESHOLD, settle_heap


def test_settle_heap_freezes_startup_objects_and_sets_thresholds() -> None:
    before = gc.get_threshold()
    try:
        settle_heap()
        assert gc.get_threshold() == GC_THRESHOLD
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
