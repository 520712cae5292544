"""Task admission: a sub-task can never be admitted wider than its parent."""

from __future__ import annotations

import pytest

from app.core.errors import ForbiddenScope
from app.core.model import Admission, DataLevel, Scope, TaskCheckpoint
from app.core.scope import check_task_admission

INTERNAL = Admission(max_level=DataLevel.INTERNAL, domains=("payments", "hr"))


def scope(level: DataLevel, domain: str | None) -> Scope:
    return Scope(tenant_id="t", key_id="k", user_id="u", groups=(), domain=domain,
                 data_level=level, session_id=None, task_id="child")


def test_narrow_takes_the_lower_level_and_the_common_domains() -> None:
    wide = Admission(max_level=DataLevel.CONFIDENTIAL, domains=None)
    assert wide.narrow(INTERNAL) == INTERNAL
    assert INTERNAL.narrow(wide) == INTERNAL
    only_hr = Admission(max_level=DataLevel.SECRET, domains=("hr",))
    assert INTERNAL.narrow(only_hr) == Admission(max_level=DataLevel.INTERNAL, domains=("hr",))
    assert INTERNAL.narrow(None) == INTERNAL


@pytest.mark.parametrize(("level", "domain", "ok"), [
    (DataLevel.INTERNAL, "payments", True), (DataLevel.PUBLIC, "hr", True),
    (DataLevel.CONFIDENTIAL, "payments", False), (DataLevel.INTERNAL, "sales", False),
    (DataLevel.INTERNAL, None, False),
])
def test_turns_beyond_the_admission_are_forbidden(level: DataLevel, domain: str | None,
                                                  ok: bool) -> None:
    cp = TaskCheckpoint(task_id="child", revision=1, user_id="u", session_id=None,
                        parent_task_id="parent", goal="g", admission=INTERNAL)
    if ok:
        check_task_admission(scope(level, domain), cp)
    else:
        with pytest.raises(ForbiddenScope):
            check_task_admission(scope(level, domain), cp)
    check_task_admission(scope(level, domain), None)  # a task with no checkpoint yet
