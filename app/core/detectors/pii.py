"""Personal-data detectors (proposed action ``mask``).

Contract: each detector finds one ``pii.*`` type (see ``docs/detectors.md``):

    pii.email           local@domain.tld (not ``icon@2x.png`` asset names, not the userinfo
                        of a URL, not an scp-style ``git@host:path`` remote)
    pii.phone           +CC international numbers (8-15 digits, spaces/dots/dashes/parens) and
                        North-American (415) 555-2671 / 415-555-2671
    pii.cn_mobile       mainland China mobile 1[3-9]XXXXXXXXX, optional +86/0086, 3-4-4 groups
    pii.cn_resident_id  18-character PRC resident ID: a province code, a real birth date
                        1900-2099 and a valid ISO 7064 MOD 11-2 check character
    pii.bank_card       13-19 digits starting 2-6, unbroken or grouped 4-4-4-4(-3) / 4-6-5 by
                        one kind of separator (space or dash), Luhn-valid
    pii.ip_address      IPv4 and IPv6, except loopback, unspecified, and the documentation
                        ranges (192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32); a
                        dotted quad right after ``v``/``version``/``版本`` is a version string
"""

from __future__ import annotations

import ipaddress
import re

from app.core.detectors.base import PatternDetector, cn_id_checksum_ok, luhn_ok, plausible_date

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


def _digit_count_ok(m: re.Match[str], _text: str) -> bool:
    return 8 <= sum(c.isdigit() for c in m.group()) <= 15


PHONE = PatternDetector(
    name="pii.phone", type="pii.phone", action="mask",
    patterns=(
        re.compile(r"(?<![\w+])(?:\+|00)[1-9]\d{0,3}(?:[ .-]?\(\d{1,4}\))?[ .-]?\d{1,14}"
                   r"(?:[ .-]\d{1,10}){0,5}(?!\d)"),
        re.compile(r"(?<![\w(-])(?:\(\d{3}\) ?|\d{3}[-.])\d{3}[-.]\d{4}(?![\w-])"),
    ),
    accept=_digit_count_ok)

CN_MOBILE = PatternDetector(
    name="pii.cn_mobile", type="pii.cn_mobile", action="mask",
    patterns=(re.compile(
        r"(?<![\d+])(?:(?:\+|00)86[ -]?)?1[3-9]\d(?:\d{8}|[ -]\d{4}[ -]\d{4})(?!\d)"),))

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


def _card_ok(m: re.Match[str], _text: str) -> bool:
    digits = re.sub(r"[ -]", "", m.group())
    return 13 <= len(digits) <= 19 and luhn_ok(digits)


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

PII_DETECTORS = (EMAIL, PHONE, CN_MOBILE, CN_RESIDENT_ID, BANK_CARD, IP_ADDRESS, IPV6_ADDRESS)
