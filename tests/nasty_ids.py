"""Ids as users have them, and the ones that try to be something else (issue 16, item 1).

Each is a valid external id. Pairs that differ only by an escaped character (``a:b`` and
``a%3Ab``), by a look-alike (Latin ``a`` and Cyrillic ``а``) or by an encoding (``a/b`` and
``a%2Fb``) must never meet in a key, a ref or a row. ``NFD_E`` is the one that is not kept as
given: it is the NFC ``é`` once normalized.
"""

from __future__ import annotations

NFC_E = "\u00e9"  # é, one code point
NFD_E = "e\u0301"  # é, e + combining acute: the same id after NFC

NASTY_IDS: tuple[str, ...] = (
    "*", "?", "[a]", "a*", "a:b", "a%3Ab", "a{b}", "{tenant}", "../x", "..", ".", "%2F", "%",
    "%25", "a/b", "a%2Fb", "a%252Fb", "a\\b", "a#b", "a@b", "a b", "' OR 1=1 --",
    "alice", "\u0430lice",  # Latin a, Cyrillic а
    "\uff41lice",  # fullwidth ａ
    NFC_E, "x" * 256, "alice@acme.com", "auth0|65f0c1", "agent:main:discord:channel:123",
    "agent:main:discord:channel:1234", "https://wiki.acme.com/Refund_Timeout",
    "docs/payments/refund.md", "s-main:tail", "s-main/events/1", "中文文档", "emoji 🙂",
)
