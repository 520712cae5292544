"""Whether a session's hot tail (a cache of its newest events) can stand for the archive.

Contract: pure; ``is_complete(tail, last_seq=..., max_len=...)`` compares the cached events'
seqs with the archive's last seq. The session service asks it before trusting a tail; a pure
rule of the session's sequence numbers, it belongs to no store.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.model import SessionEvent


def is_complete(tail: Sequence[SessionEvent], *, last_seq: int, max_len: int) -> bool:
    """Whether ``tail`` is exactly the session's last ``min(max_len, last_seq)`` events.

    Seqs are 1-based and gapless in the archive, so a complete tail is the contiguous run
    ``last_seq - n + 1 .. last_seq``. Anything else (empty after a flush or expiry, shorter after
    an append onto an expired key, a gap from a skipped entry, out-of-order concurrent appends,
    or a tail ahead of/behind ``last_seq``) is incomplete and must be rebuilt.
    """
    if last_seq < 0 or max_len < 1:
        return False
    n = min(max_len, last_seq)
    if len(tail) != n:
        return False
    first = last_seq - n + 1
    return all(e.seq == first + i for i, e in enumerate(tail))
