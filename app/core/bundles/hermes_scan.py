"""Hermes's context-file injection scan, reimplemented: which threat ids a text triggers.

Contract: ``findings(text)`` returns the ids Hermes Agent's ``scan_for_threats(content,
scope="context")`` (``tools/threat_patterns.py``) reports for ``text``, in its order:
first one ``invisible_unicode_U+XXXX`` per distinct invisible or bidi-control code point
(sorted by code point here; Hermes iterates a set, whose order varies run to run), then the
id of every detector that matches, in the order below. Like Hermes, only the first
``MAX_SCAN_CHARS`` characters are read, invisible characters are looked for in the raw
text, and the detectors run case-insensitively on its NFKC normal form. ``blocked(label,
ids)`` is the placeholder Hermes injects instead of a file that had findings.

The detectors are the "all" and "context" scopes of Hermes's table (the "strict" scope
is for memory and skill writes, not context files); each is written here from its
documented intent, so a change upstream is caught by the conformance table, not copied.
"""

from __future__ import annotations

import re
import unicodedata

MAX_SCAN_CHARS = 65_536
INVISIBLE = frozenset("\u200b\u200c\u200d\u2060\u2062\u2063\u2064\ufeff"
                      "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

_GAP = r"(?:\w+\s+){0,8}"  # up to eight filler words between the key words
_SENSITIVE_VAR_REF = r"\$\{?\w*(?:KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)S?\b"


def _words(*parts: str) -> str:
    """Key words separated by whitespace, with ``_GAP`` where a part is ``...``."""
    out = ""
    for part in parts:
        out += _GAP if part == "..." else part + r"\s+"
    return out.removesuffix(r"\s+")


_DETECTORS: tuple[tuple[str, str], ...] = (
    ("prompt_injection", _words("ignore", "...", "(previous|all|above|prior)", "...",
                                "instructions")),
    ("sys_prompt_override", r"system\s+prompt\s+override"),
    ("disregard_rules", _words("disregard", "...", "(your|all|any)", "...",
                               "(instructions|rules|guidelines)")),
    ("bypass_restrictions", _words("act", "as", "(if|though)", "...", "you", "...",
                                   "(have\\s+no|don't\\s+have)", "...",
                                   "(restrictions|limits|rules)")),
    ("html_comment_injection", r"<!--[^>]{0,512}(?<![A-Za-z])"
                               r"(?:ignore|override|system|secret|hidden)(?![A-Za-z])"
                               r"[^>]{0,512}-->"),
    ("hidden_div", r"<\s*div\s+style\s*=\s*[\"'][^>]{0,2048}display\s*:\s*none"),
    ("translate_execute", r"translate\s+[^\n]{0,512}\s+into\s+\w+(?:[\s-]+\w+){0,2}\s+and\s+"
                          r"(execute|run|eval)\b"),
    ("deception_hide", _words("do", "not", "...", "tell", "...", "the", "user")),
    ("role_hijack", _words("you", "are", "...", "now", "(?:a|an|the)") + r"\s+"),
    ("role_pretend", _words("pretend", "...", "(you\\s+are|to\\s+be)") + r"\s+"),
    ("leak_system_prompt", _words("output", "...", "(system|initial)", "prompt")),
    ("remove_filters", _words("(respond|answer|reply)", "without", "...",
                              "(restrictions|limitations|filters|safety)")),
    ("fake_update", _words("you", "have", "been", "...", "(updated|upgraded|patched)", "to")),
    ("identity_override", r"\bname\s+yourself\s+\w+"),
    ("c2_node_registration", r"register\s+(as\s+)?a?\s*node"),
    ("c2_heartbeat", r"(heartbeat|beacon|check[\s\-]?in)\s+(to|with)\s+"),
    ("c2_task_pull", r"pull\s+(down\s+)?(?:new\s+)?task(?:ing|s)?\b"),
    ("c2_network_connect", r"connect\s+to\s+the\s+network\b"),
    ("forced_action", r"you\s+must\s+(?:\w+\s+){0,3}(register|connect|report|beacon)\b"),
    ("anti_forensic_oneliner", r"only\s+use\s+one[\s\-]?liners?\b"),
    ("anti_forensic_disk", _words("never", "...", "(?:create|write)", "...",
                                  "(?:script|file)", "...", "disk")),
    ("env_var_unset_agent", r"unset\s+\w*(?:CLAUDE|CODEX|HERMES|AGENT|OPENAI|ANTHROPIC)\w*"),
    ("known_c2_framework", r"\b(?:cobalt\s*strike|sliver|havoc|mythic|metasploit|brainworm)\b"),
    ("c2_explicit", r"\bc2\s+(?:server|channel|infrastructure|beacon)\b"),
    ("c2_explicit_long", r"\bcommand\s+and\s+control\b"),
    ("exfil_curl", r"curl\s+[^\n]{0,2048}" + _SENSITIVE_VAR_REF),
    ("exfil_wget", r"wget\s+[^\n]{0,2048}" + _SENSITIVE_VAR_REF),
    ("read_secrets", r"cat\s+[^\n]{0,2048}(\.env|credentials|\.netrc|\.pgpass|\.npmrc|\.pypirc)"),
)
_COMPILED = tuple((pid, re.compile(rx, re.IGNORECASE)) for pid, rx in _DETECTORS)


def findings(text: str) -> list[str]:
    head = text[:MAX_SCAN_CHARS]
    found = [f"invisible_unicode_U+{ord(ch):04X}" for ch in sorted(set(head) & INVISIBLE)]
    folded = unicodedata.normalize("NFKC", head)
    found += [pid for pid, rx in _COMPILED if rx.search(folded)]
    return found


def blocked(label: str, ids: list[str]) -> str:
    return (f"[BLOCKED: {label} contained potential prompt injection ({', '.join(ids)}). "
            "Content not loaded.]")
