"""Phone numbers, international and in national formats, validated by libphonenumber.

Contract: ``PHONE`` is a ``Detector`` of type ``pii.phone`` (proposed action ``mask``). A
linear regex proposes candidates: a run of 8-15 digits with at most two separators (space,
dot, dash, parentheses) between digits, not glued to a word, a hex id or a dash. A candidate
becomes a finding when ``phonenumbers`` (Google's libphonenumber metadata, pure computation)
says it is

* ``+CC …`` / ``00CC …``: a possible number of that country (its length fits the plan), or
* national (no country code): a *valid* number of one of ``REGIONS`` (the English-speaking
  countries, the EU members, mainland China, Hong Kong, Macao, Taiwan) — prefix and length
  fit a real numbering range — and it either has a phone word shortly before it (tel, phone,
  call, 电话, 手机 …) or is written like a phone number: grouped by separators and starting
  with a trunk ``0`` or a parenthesised area code, or in three or more groups.

Never: a date or time (``2024-01-15``, ``15.01.2024``), a dotted quad, a digit run right after
an id word (order, invoice, ticket, ref, build, 订单, 单号 …) or ``#``, a piece of a UUID, SHA
or trace id (glued to hex letters or dashes), or an unbroken digit run without a phone word
(timestamps, order numbers). Mainland mobiles without a country code are ``pii.cn_mobile``.

Why parse-and-validate rather than ``PhoneNumberMatcher``: the matcher runs its own large
candidate regex over the whole text once per region, 39 passes per candidate text; validating
the few candidates our regex proposes is the same ``is_valid_number`` check (``Leniency.VALID``)
at a fraction of the cost, and the date/id exclusions are ours either way. A text with more
than ``VALIDATIONS`` candidates gets the rest masked by shape alone (fail closed, bounded).
"""

from __future__ import annotations

import re

import phonenumbers

from app.core.detectors.literals import Factor
from app.core.guards.safety import Finding

# (region, country code, national trunk prefix). Numbers written with a leading 0 are tried
# in the regions that dial a trunk 0 (and Italy, whose 0 belongs to the number); others in
# the regions without one (NANP's 1 is optional). A unit test checks this against the metadata.
TRUNK_ZERO = (("GB", 44, "0"), ("IE", 353, "0"), ("AU", 61, "0"), ("NZ", 64, "0"),
              ("ZA", 27, "0"), ("IN", 91, "0"), ("CN", 86, "0"), ("TW", 886, "0"),
              ("DE", 49, "0"), ("FR", 33, "0"), ("IT", 39, ""), ("RO", 40, "0"),
              ("NL", 31, "0"), ("BE", 32, "0"), ("SE", 46, "0"), ("HU", 36, "06"),
              ("AT", 43, "0"), ("BG", 359, "0"), ("FI", 358, "0"), ("SK", 421, "0"),
              ("HR", 385, "0"), ("LT", 370, "0"), ("SI", 386, "0"))
NO_TRUNK = (("US", 1, "1"), ("SG", 65, ""), ("HK", 852, ""), ("MO", 853, ""), ("IT", 39, ""),
            ("ES", 34, ""), ("PL", 48, ""), ("CZ", 420, ""), ("GR", 30, ""), ("PT", 351, ""),
            ("DK", 45, ""), ("LV", 371, ""), ("EE", 372, ""), ("CY", 357, ""), ("LU", 352, ""),
            ("MT", 356, ""))
REGIONS = tuple(dict.fromkeys(r for r, _, _ in TRUNK_ZERO + NO_TRUNK))
# Validation costs up to ~0.2 ms a candidate (every region tried): past this many candidates
# in one text (a phone list, or a flood meant to stall the turn) a phone-shaped candidate is
# masked unvalidated — more masking, never less, and time stays linear with a small constant.
VALIDATIONS = 1000

_CANDIDATE = re.compile(  # parentheses only around an area code, or (0) after a country code
    r"(?<![0-9A-Za-z_+\-/#.@])(?<!\d:)(?:(?P<intl>\+|00)\d{1,3}[ .\-]?(?:\(0\)[ .\-]?)?"
    r"|\(\d{1,5}\)[ .\-]?)?\d(?:[ .\-]{0,2}\d){5,16}(?![0-9A-Za-z_\-/@+]|[.:]\d)")
_PHONE_WORDS = re.compile(
    r"(?<![A-Za-z_])(?:phone|tel|call|mobile|mob|cell|fax|whatsapp|contact|ring|dial|reach|sms"
    r"|text me|hotline|helpline|line|number|no\.|ll[aá]m|tel[eé]fono|t[eé]l[eé]phone|appel"
    r"|ruf|anruf|telefon|zadzwo|bel ons|chiam|ligue|puhelin|电话|電話|手机|手機|联系|聯絡|聯繫"
    r"|致电|拨打|撥打|座机|传真|傳真|热线|號碼|号码)[^0-9\n]{0,24}$", re.IGNORECASE)
_ID_WORDS = re.compile(
    r"(?<![A-Za-z])(?:order|invoice|ticket|case|ref|reference|tracking|id|sku|build|version|ver|v|po|txn"
    r"|transaction|account|acct|serial|batch|job|run|pr|issue|订单|单号|编号|工单|快递|流水)"
    r"\s{0,2}(?:no\.?|number|#|n[or]\.?)?\s{0,2}[:：#=]?\s{0,2}$", re.IGNORECASE)
_DATE = re.compile(r"\(?(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}"
                   r"|\d{4} (?:0[1-9]|1[0-2]) (?:0[1-9]|[12]\d|3[01]))"
                   r"(?:[ T]\d{1,2})?")
_DOTTED_QUAD = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_SEPARATOR_RUN = re.compile(r"[ .\-()]+")
_CN_MOBILE = re.compile(r"1[3-9]\d{9}")
# 10 000 000 / 123 456 789: thousands, unless a phone word says otherwise (ES/PL write 3-3-3)
_THOUSANDS = re.compile(r"\d{1,3}(?: \d{3}){2,4}")
_UNIT_AFTER = re.compile(r" ?(?:[nmµu]?s|min|h|bytes?|[KMGT]i?B|[kKMG]?Hz|kg|km|m|EUR|USD|GBP|CNY|"
                         r"RMB|HKD|€|\$|£|¥|元|円|%)(?![A-Za-z])")


def _context(text: str, start: int, pattern: re.Pattern[str]) -> bool:
    """``pattern`` ends at ``start`` within 32 characters. Neither pattern spans a digit or a
    line break, so the window starts after the last one: a regex search tries every position
    of its window (~15 us on 32), and between the numbers of a list there are one or two."""
    lo, i = max(0, start - 32), start
    while i > lo and not (text[i - 1].isdigit() or text[i - 1] == "\n"):
        i -= 1
    return pattern.search(text, i, start) is not None


def after_id_word(text: str, start: int) -> bool:
    """An id word (order, invoice, ``span_id=``, 订单号 …) right before ``start``."""
    return _context(text, start, _ID_WORDS)


def _valid_national(digits: str) -> bool:
    """A valid number of some region, dialled nationally (built directly, not ``parse``d:
    parsing per region costs ~25 us, and it is the same ``is_valid_number`` at the end)."""
    for _region, cc, trunk in TRUNK_ZERO if digits[0] == "0" else NO_TRUNK:
        nsn = digits[len(trunk):] if trunk and digits.startswith(trunk) else digits
        if not nsn:
            continue
        zeros = len(nsn) - len(nsn.lstrip("0"))
        number = phonenumbers.PhoneNumber(
            country_code=cc, national_number=int(nsn), italian_leading_zero=zeros > 0 or None,
            number_of_leading_zeros=zeros if zeros > 1 else None)
        if phonenumbers.is_valid_number(number):
            return True
    return False


def _international(value: str) -> bool:
    try:
        number = phonenumbers.parse("+" + value.lstrip("+")[2 if value.startswith("00") else 0:])
    except phonenumbers.NumberParseException:
        return False
    return phonenumbers.is_possible_number(number)


def _national_shape(value: str) -> bool:
    """Written as people write phone numbers: a trunk ``0`` or ``(area)`` and a separator,
    or three or more groups."""
    groups = [g for g in _SEPARATOR_RUN.split(value) if g]
    return (len(groups) >= 2 and value[0] in "0(") or len(groups) >= 3


def _is_phone(m: re.Match[str], text: str, *, validate: bool) -> bool:
    value = m.group()
    digits = "".join(ch for ch in value if ch.isdigit())
    if not 8 <= len(digits) <= 15 or _UNIT_AFTER.match(text, m.end()):
        return False
    if not value.startswith("+") and after_id_word(text, m.start()):
        return False
    if _DATE.search(value) or _DOTTED_QUAD.fullmatch(value):
        return False
    groups = _SEPARATOR_RUN.split(value.replace("(0)", " "))
    if sum(len(g) == 1 for g in groups) > 1:  # 2 7-10 23-25: line ranges
        return False
    if m.group("intl"):
        return not validate or _international(value)
    if _CN_MOBILE.fullmatch(digits):  # pii.cn_mobile's
        return False
    phone_word = _context(text, m.start(), _PHONE_WORDS)
    if len(digits) > 12 or not (phone_word or _national_shape(value)):
        return False
    if _THOUSANDS.fullmatch(value) and not phone_word:
        return False
    return not validate or _valid_national(digits)


class PhoneDetector:
    name = "pii.phone"
    # for the prefilter: at most one one-digit group in 8+ digits, so two adjacent digits
    triggers: tuple[Factor, ...] = (frozenset(f"{i:02d}" for i in range(100)),)

    def __call__(self, text: str) -> list[Finding]:
        out: list[Finding] = []
        for i, m in enumerate(_CANDIDATE.finditer(text)):
            if _is_phone(m, text, validate=i < VALIDATIONS):
                out.append(Finding(type="pii.phone", action="mask", start=m.start(), end=m.end()))
        return out


PHONE = PhoneDetector()
