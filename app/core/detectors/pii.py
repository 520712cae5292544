"""Personal-data detectors (proposed action ``mask``).

Contract: each detector finds one ``pii.*`` type (see ``docs/detectors.md``):

    pii.email           local@domain.tld (not ``icon@2x.png`` asset names, not the userinfo
                        of a URL, not an scp-style ``git@host:path`` remote)
    pii.phone           international and national formats, validated by libphonenumber
                        (``app.core.detectors.phone``)
    pii.cn_mobile       mainland China mobile 1[3-9]XXXXXXXXX, optional +86/0086, 3-4-4 groups
    pii.cn_resident_id  18-character PRC resident ID: a province code, a real birth date
                        1900-2099 and a valid ISO 7064 MOD 11-2 check character
    pii.bank_card       13-19 digits starting 2-6, unbroken or grouped 4-4-4-4(-3) / 4-6-5 by
                        one kind of separator (space or dash), Luhn-valid or after a card
                        word (card, Visa, 卡号 …)
    pii.iban            an IBAN with its country's registry length and a MOD 97-10 check
    pii.person_name     names after labels, pii.address street lines
                        (``app.core.detectors.people``)
    pii.ip_address      IPv4 and IPv6, except loopback, unspecified, and the documentation
                        ranges (192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32); a
                        dotted quad right after ``v``/``version``/``版本`` is a version string
"""

from __future__ import annotations

import ipaddress
import re

from app.core.detectors.base import PatternDetector, cn_id_checksum_ok, luhn_ok, plausible_date
from app.core.detectors.people import ADDRESS, PERSON_NAME
from app.core.detectors.phone import PHONE, after_id_word

_ASSET_TLDS = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "css", "js", "ts"})


_USERINFO = re.compile(r"://[^\s/@]{0,256}$")  # ``scheme://user:pass@host`` is no address
_SCP_PATH = re.compile(r":[^\s\d]")  # ``git@github.com:org/repo.git`` is a remote, not a person


def _email_ok(m: re.Match[str], _text: str) -> bool:
    before = m.string[max(0, m.start() - 270):m.start()]
    return (m.group("tld").lower() not in _ASSET_TLDS and not _USERINFO.search(before)
            and not _SCP_PATH.match(m.string, m.end()))


EMAIL = PatternDetector(
    name="pii.email", type="pii.email", action="mask",
    patterns=(re.compile(
        r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}"
        r"(?:\.[A-Za-z0-9-]{1,63}){0,6}\.(?P<tld>[A-Za-z]{2,24})(?![A-Za-z0-9-])"),),
    accept=_email_ok)


_KEY_BEFORE = re.compile(r"(?<![A-Za-z_])([A-Za-z_]{1,32})=$")
_PHONE_KEYS = ("phone", "mobile", "tel", "cell", "msisdn", "contact")


def _cn_mobile_ok(m: re.Match[str], text: str) -> bool:
    """Not an id (``span_id=``, 订单号) nor another ``key=`` value (``free=15482871808``)."""
    key = _KEY_BEFORE.search(text, max(0, m.start() - 33), m.start())
    if key and not any(w in key.group(1).lower() for w in _PHONE_KEYS):
        return False
    return not after_id_word(text, m.start())


CN_MOBILE = PatternDetector(
    name="pii.cn_mobile", type="pii.cn_mobile", action="mask",
    patterns=(re.compile(
        r"(?<![0-9A-Za-z_+\-])(?:(?:\+|00)86[ -]?)?1[3-9]\d(?:\d{8}|[ -]\d{4}[ -]\d{4})"
        r"(?![0-9A-Za-z_\-])"),),
    accept=_cn_mobile_ok)

_PROVINCES = frozenset({11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43,
                        44, 45, 46, 50, 51, 52, 53, 54, 61, 62, 63, 64, 65, 71, 81, 82, 83, 91})


def _resident_id_ok(m: re.Match[str], _text: str) -> bool:
    number = m.group()
    return (int(number[:2]) in _PROVINCES
            and plausible_date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
            and cn_id_checksum_ok(number))


CN_RESIDENT_ID = PatternDetector(
    name="pii.cn_resident_id", type="pii.cn_resident_id", action="mask",
    patterns=(re.compile(r"(?<![0-9A-Za-z])[1-9]\d{5}(?:19|20)\d{9}[0-9Xx](?![0-9A-Za-z])"),),
    accept=_resident_id_ok)


_CARD_WORDS = re.compile(
    r"(?:card|visa|mastercard|amex|cc|pan|卡号|卡號|信用卡|银行卡|銀行卡|借记卡|储蓄卡)"
    r"[^0-9\n]{0,20}$", re.IGNORECASE)


def _card_ok(m: re.Match[str], text: str) -> bool:
    """Luhn-valid, or labelled as a card (a mistyped card number is still one)."""
    digits = re.sub(r"[ -]", "", m.group())
    if not 13 <= len(digits) <= 19:
        return False
    labelled = _CARD_WORDS.search(text, max(0, m.start() - 28), m.start()) is not None
    return labelled or luhn_ok(digits)


BANK_CARD = PatternDetector(
    name="pii.bank_card", type="pii.bank_card", action="mask",
    patterns=(re.compile(
        r"(?<![\d.])(?<!\d[ -])[2-6](?:\d{12,18}"  # unbroken, or grouped 4-4-4-4(-3) / 4-6-5
        r"|\d{3}(?P<sep>[ -])\d{4}(?P=sep)\d{4}(?P=sep)\d{4}(?:(?P=sep)\d{3})?"
        r"|\d{3}(?P<amex>[ -])\d{6}(?P=amex)\d{5})(?![\d.])(?!-\d)"),),
    accept=_card_ok)

_DOC_NETS = tuple(ipaddress.ip_network(n) for n in (
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))
_VERSION_BEFORE = re.compile(r"(?:\bv|\bversion\s{0,2}|版本\s{0,2}|\bver\.?\s{0,2})$",
                             re.IGNORECASE)
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"


def _public_ip(text: str) -> bool:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    if ip.is_loopback or ip.is_unspecified:
        return False
    return not any(ip.version == net.version and ip in net for net in _DOC_NETS)


def _ip_ok(m: re.Match[str], _text: str) -> bool:
    before = m.string[max(0, m.start() - 10):m.start()]
    return _public_ip(m.group()) and not _VERSION_BEFORE.search(before)


def _ipv6_ok(m: re.Match[str], _text: str) -> bool:
    value = m.group()
    groups = [g for g in value.split(":") if g]
    if value.count(":") < 3 and not ("::" in value and len(groups) >= 2):
        return False
    return _public_ip(value)


IP_ADDRESS = PatternDetector(
    name="pii.ip_address", type="pii.ip_address", action="mask",
    patterns=(re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?!\w|\.\d)"),),
    accept=_ip_ok)
IPV6_ADDRESS = PatternDetector(
    name="pii.ip_address/v6", type="pii.ip_address", action="mask",
    patterns=(re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])"),),
    accept=_ipv6_ok)

# ISO 13616 registry: IBAN length per country (SWIFT's IBAN Registry)
_IBAN_LENGTHS = {cc: int(n) for cc, n in re.findall(r"([A-Z]{2})(\d\d)", (
    "AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BR29 BY28 CH21 CR22 CY28 CZ24 DE22 DK18 "
    "DO28 EE20 EG29 ES24 FI18 FO18 FR27 GB22 GE22 GI23 GL18 GR27 GT28 HR21 HU28 IE22 IL23 "
    "IQ23 IS26 IT27 JO30 KW30 KZ20 LB28 LC32 LI21 LT20 LU20 LV21 MC27 MD24 ME22 MK19 MR27 "
    "MT31 MU30 NL18 NO15 PK24 PL28 PS29 PT25 QA29 RO24 RS22 SA24 SC31 SE24 SI19 SK24 SM27 "
    "ST25 SV28 TL23 TN24 TR26 UA29 VA22 VG24 XK20"))}


def iban_ok(compact: str) -> bool:
    """The registry length of its country and the ISO 7064 MOD 97-10 check (remainder 1)."""
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


_IBAN_WORD = re.compile(r"iban[^\n]{0,12}$", re.IGNORECASE)


def _iban_ok(m: re.Match[str], text: str) -> bool:
    """Lower case (a hex id of the right length passes MOD 97 once in 97) only after 'IBAN'."""
    value = m.group()
    if not value.isupper() and not _IBAN_WORD.search(text, max(0, m.start() - 16), m.start()):
        return False
    return iban_ok(value.replace(" ", "").upper())


IBAN = PatternDetector(
    name="pii.iban", type="pii.iban", action="mask",
    patterns=(re.compile(  # grouped by 4 (the print format) or unbroken (the electronic one)
        r"(?<![0-9A-Za-z])(?:[A-Z]{2}\d{2}(?:(?: ?[0-9A-Z]{4}){2,7}(?: ?[0-9A-Z]{1,3})?"
        r"|[0-9A-Z]{11,30})|[a-z]{2}\d{2}(?:(?: ?[0-9a-z]{4}){2,7}(?: ?[0-9a-z]{1,3})?"
        r"|[0-9a-z]{11,30}))(?![0-9A-Za-z])"),),
    accept=_iban_ok)

PII_DETECTORS = (EMAIL, PHONE, CN_MOBILE, CN_RESIDENT_ID, BANK_CARD, IBAN, IP_ADDRESS,
                 IPV6_ADDRESS, PERSON_NAME, ADDRESS)
