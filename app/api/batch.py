"""The write endpoints' batch form: one object, or ``{"items": [...]}`` of 1..100 of them.

A batch is all or nothing. Validation (422, the item's index in ``loc``) and the per-item
permission checks run before anything is written; a check that fails names the item
(``items[i]: ...``) and fails the whole batch with its usual status. Then the batch is one
embedder call and one transaction. Policy decisions (the memory write gate) are answers, not
errors: each item carries its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from app.core.errors import DomainError

T = TypeVar("T")


def check_each(items: Sequence[T], check: Callable[[T], None], *, batch: bool) -> None:
    """``check`` every item; in a batch, the error says which item failed."""
    for i, item in enumerate(items):
        try:
            check(item)
        except DomainError as exc:
            if not batch:
                raise
            raise type(exc)(f"items[{i}]: {exc.detail}") from exc
