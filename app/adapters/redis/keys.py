"""Key names for everything ctxgate keeps in Redis, tenant-namespaced by construction.

Layout: ``{prefix}:t:{tenant_id}:{kind}:...`` — the tenant segment always comes second, so a key
built for tenant A can never equal a key built for tenant B.

Ids are validated upstream (``[A-Za-z0-9._-]{1,128}``), but the builder re-checks them: an id
holding ``:`` could forge another key's shape, ``{``/``}`` would change Redis Cluster hash-slot
routing, and whitespace or control characters make keys unreadable in tooling. Such an id is a
bug upstream, so it raises ``ValueError`` rather than being escaped silently.
"""

from __future__ import annotations

MAX_ID_LEN = 128
_FORBIDDEN = frozenset(":{}")


def check_id(value: str, *, what: str) -> str:
    """``value`` unchanged if it is safe as a key segment, else ``ValueError``."""
    if not value or len(value) > MAX_ID_LEN:
        raise ValueError(f"{what} must be 1..{MAX_ID_LEN} characters")
    for ch in value:
        if ch in _FORBIDDEN or ch.isspace() or not ch.isprintable():
            raise ValueError(f"{what} contains a forbidden character: {ch!r}")
    return value


def check_prefix(prefix: str) -> str:
    # The prefix comes from settings, not users, and may itself hold ':' ("ctxgate:prod"); it
    # still must not be empty or hold braces/whitespace, for the same reasons as ids.
    if not prefix or any(ch in "{}" or ch.isspace() for ch in prefix):
        raise ValueError("redis prefix must be non-empty, without braces or whitespace")
    return prefix


def tail_key(prefix: str, tenant_id: str, session_id: str) -> str:
    tenant = check_id(tenant_id, what="tenant_id")
    session = check_id(session_id, what="session_id")
    return f"{prefix}:t:{tenant}:s:{session}:tail"


def replay_key(prefix: str, tenant_id: str, turn_id: str) -> str:
    tenant = check_id(tenant_id, what="tenant_id")
    turn = check_id(turn_id, what="turn_id")
    return f"{prefix}:t:{tenant}:turn:{turn}:replay"
