"""External ids as users have them, and the one escaping that makes them safe in keys and refs.

An external id (tenant, user, session, task, agent, group, domain, document, memory key,
bundle, client turn id) is opaque: 1..``MAX_ID_LEN`` characters of printable Unicode, no
control, format or separator characters other than the plain space, no leading or trailing
whitespace. ``normalize_id`` returns its NFC form, and that form is what is stored, compared
and echoed: two spellings of ``é`` (NFC ``U+00E9``, NFD ``e U+0301``) are one id; look-alikes
(Cyrillic ``а`` beside Latin ``a``) stay different ids, as they are different characters.

The narrow alphabet ids once had is kept where it mattered, at the depth it matters:
``escape_segment`` percent-encodes (UTF-8) every character outside ``[A-Za-z0-9._~-]``, ``%``
included. Its output is plain ASCII with no separator (``:`` ``/`` ``#`` ``@``), glob
(``*`` ``?`` ``[`` ``]`` ``\\``), hash-tag (``{`` ``}``) or space character; it is injective
and ``unescape_segment`` inverts it, so an id can neither forge another key or ref nor match
a pattern meant for another. Plain ids (the old alphabet) come out unchanged, so their keys
and refs read as before.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote, unquote

MAX_ID_LEN = 256
# Cc control, Cs surrogates, Co private use, Cn unassigned, Cf format (zero-width joiners,
# bidi overrides: invisible, they make two ids look the same), Zl/Zp line breaks.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cs", "Co", "Cn", "Cf", "Zl", "Zp"})
# What quote(safe="") leaves as it is (RFC 3986 unreserved), ASCII only.
_UNRESERVED = re.compile(r"[A-Za-z0-9._~-]*", re.ASCII)


def normalize_id(value: str) -> str:
    """``value`` in NFC if it is a valid external id, else ``ValueError`` saying why."""
    if "\x00" in value:
        raise ValueError("an id must not contain NUL (U+0000)")
    nfc = unicodedata.normalize("NFC", value)
    if not 1 <= len(nfc) <= MAX_ID_LEN:
        raise ValueError(f"an id must be 1..{MAX_ID_LEN} characters")
    for ch in nfc:
        if unicodedata.category(ch) in _REFUSED_CATEGORIES or (ch.isspace() and ch != " "):
            raise ValueError(f"an id must be printable: it contains U+{ord(ch):04X}")
    if nfc[0] == " " or nfc[-1] == " ":
        raise ValueError("an id must not start or end with whitespace")
    return nfc


def escape_segment(value: str) -> str:
    """``value`` as one key or ref segment: percent-encoded outside ``[A-Za-z0-9._~-]``."""
    # Most ids need no escaping, and a turn builds hundreds of refs and keys: one C-level
    # match instead of quote()'s per-character Python work (~7 us) for those.
    if _UNRESERVED.fullmatch(value):
        return value
    return quote(value, safe="")


def unescape_segment(segment: str) -> str:
    """The inverse of ``escape_segment``."""
    return unquote(segment, errors="strict")
