"""Task checkpoints: versioned structured state; a task belongs to the user who created it.

Each checkpoint carries the task's admission — the widest scope it may ever be assembled
with: the writing key's caps, narrowed by the task's own first admission and by its parent
task's. So a sub-task reads only what its parent was allowed, and a task never widens.

Retention: a checkpoint revision is served for ``retention_days`` after it was written
(settings ``task_checkpoint_retention_days``, the seeds' 30 days); an older one reads as
absent, for ``get`` and for a turn. Rows are not deleted here (a purge job may come later);
writing a new revision serves the task again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from app.core.candidates import scan_task_state
from app.core.errors import NotFound
from app.core.guards.safety import Detector
from app.core.model import Admission, Principal, TaskCheckpoint
from app.ports import TaskStore


class TaskService:
    """``scan``: the pipeline's detector. A revision is written with what it finds in the
    task state's texts (``candidates.scan_task_state``, rendered with the revision the write
    expects to get): a worker's first turn on the task then scans none of it, where it used
    to scan ~10 kB of task state per worker (20-30 ms on loaded cores, every first turn)."""

    def __init__(self, store: TaskStore, *, retention_days: int = 30,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC),
                 scan: Detector | None = None) -> None:
        self._store = store
        self._retention = timedelta(days=retention_days)
        self._now = now
        self._scan = scan

    def _live(self, found: TaskCheckpoint | None) -> TaskCheckpoint | None:
        if found is None or found.created_at is None:
            return found
        return found if found.created_at + self._retention > self._now() else None

    async def put(
        self, *, principal: Principal, checkpoint: TaskCheckpoint,
        expected_revision: int | None,
    ) -> int:
        tenant_id = principal.tenant_id
        latest = await self._store.get(tenant_id=tenant_id, task_id=checkpoint.task_id)
        if latest is not None and latest.user_id != checkpoint.user_id:
            raise NotFound(f"no task {checkpoint.task_id!r}")
        if expected_revision == 0 and latest is not None and self._live(latest) is None:
            # The writer saw no checkpoint because the stored one is past its retention (it
            # reads as absent): this write is the task's next revision, not a conflict. A
            # compaction building on an expired checkpoint otherwise failed with a stale
            # revision at every turn, and never stored its view.
            expected_revision = latest.revision
        admission = Admission(max_level=principal.max_data_level, domains=principal.domains)
        admission = admission.narrow(latest.admission if latest else None)
        if checkpoint.parent_task_id is not None:
            parent = await self._store.get(tenant_id=tenant_id, task_id=checkpoint.parent_task_id)
            if parent is None or parent.user_id != checkpoint.user_id:
                raise NotFound(f"no parent task {checkpoint.parent_task_id!r}")
            admission = admission.narrow(parent.admission)
        # A checkpoint built from a read one carries that revision's findings: never stored
        # for another revision (they are of another text).
        new = replace(checkpoint, admission=admission, scanned=())
        if self._scan is not None:
            # The revision this write gets unless a concurrent unconditional writer takes it
            # first: then the stored findings are of another text, and a turn scans.
            revision = (expected_revision if expected_revision is not None
                        else latest.revision if latest is not None else 0) + 1
            new = replace(new, scanned=scan_task_state(replace(new, revision=revision),
                                                       self._now(), self._scan))
        return await self._store.put(tenant_id=tenant_id, checkpoint=new,
                                     expected_revision=expected_revision)

    async def get(
        self, *, tenant_id: str, task_id: str, user_id: str | None, revision: int | None = None
    ) -> TaskCheckpoint:
        found = self._live(await self._store.get(tenant_id=tenant_id, task_id=task_id,
                                                 revision=revision))
        if found is None or (user_id is not None and found.user_id != user_id):
            raise NotFound(f"no task {task_id!r}" + (f" revision {revision}" if revision else ""))
        return found

    async def for_turn(self, *, tenant_id: str, task_id: str, user_id: str
                       ) -> TaskCheckpoint | None:
        """The latest checkpoint of a task for a turn; a task with none yet (or none within
        the retention) is normal."""
        found = self._live(await self._store.get(tenant_id=tenant_id, task_id=task_id))
        if found is not None and found.user_id != user_id:
            raise NotFound(f"no task {task_id!r}")
        return found
