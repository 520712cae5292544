"""Key names for everything ctxgate keeps in Redis, tenant-namespaced by construction.

Layout: ``{prefix}:t:{tenant}:{kind}:{id}:...`` — the tenant segment always comes second, so a
key built for tenant A can never equal a key built for tenant B. A session's keys wrap
``s:<session>`` in braces, a Redis Cluster hash tag (``session_key``); a tenant's quota state
wraps ``q:<tenant>`` (``quota_key``).

Ids are opaque (``app.core.ids``: ``alice@acme.com``, ``agent:main:discord:channel:123``), so
every id becomes a segment through ``segment`` (``escape_segment``): ``:`` cannot forge another
key's shape, ``{``/``}`` cannot change Redis Cluster hash-slot routing, ``*?[]\\`` cannot widen
a SCAN pattern, and whitespace or control characters never reach a key. Plain ids read as
themselves. The erasure SCAN compares the segments of the keys it finds with ``segment`` of
the ids it erases.
"""

from __future__ import annotations

from app.core.ids import escape_segment

_GLOB = frozenset("*?[]\\")


def segment(value: str, *, what: str) -> str:
    """``value`` as one key segment (escaped); ``ValueError`` if it is empty."""
    if not value:
        raise ValueError(f"{what} must not be empty")
    return escape_segment(value)


def check_prefix(prefix: str) -> str:
    # The prefix comes from settings, not users, and may itself hold ':' ("ctxgate:prod"); it
    # still must not be empty, hold braces or whitespace (as ids may not), or glob characters,
    # which would make the erasure's SCAN pattern match keys outside the namespace.
    if not prefix or any(ch in "{}" or ch in _GLOB or ch.isspace() for ch in prefix):
        raise ValueError("redis prefix must be non-empty, without braces, glob characters "
                         "(* ? [ ] \\) or whitespace")
    return prefix


def namespace(prefix: str, tenant_id: str) -> str:
    """Every key of the tenant starts with this (it ends with ``:``)."""
    return f"{prefix}:t:{segment(tenant_id, what='tenant_id')}:"


def session_key(prefix: str, tenant_id: str, session_id: str, kind: str) -> str:
    """``{namespace}{s:<session>}:{kind}`` — per-session data (``tail``, ``pins``). The braces
    are a Redis Cluster hash tag: every key of one session is in one slot (ids are escaped, so
    no id can open or close a tag of its own)."""
    return (f"{namespace(prefix, tenant_id)}{{s:{segment(session_id, what='session_id')}}}"
            f":{kind}")


def tail_key(prefix: str, tenant_id: str, session_id: str) -> str:
    return session_key(prefix, tenant_id, session_id, "tail")


def replay_key(prefix: str, tenant_id: str, turn_id: str) -> str:
    return f"{namespace(prefix, tenant_id)}turn:{segment(turn_id, what='turn_id')}:replay"


def quota_key(prefix: str, tenant_id: str, kind: str) -> str:
    """``{namespace}{q:<tenant>}:{kind}`` — a tenant's quota state (``rate``, ``key:<id>:rate``,
    ``turns``). One hash tag per tenant: a script may touch all of a tenant's quota keys on a
    cluster, and tenants still spread over the slots."""
    return f"{namespace(prefix, tenant_id)}{{q:{segment(tenant_id, what='tenant_id')}}}:{kind}"
