"""Secret detectors: credentials that must never reach a model (proposed action ``drop``).

Contract: each detector finds one ``secret.*`` type (see ``docs/detectors.md``):

    secret.aws_access_key     AKIA/ASIA/... + 16 upper-case alphanumerics
    secret.github_token       ghp_/gho_/ghu_/ghs_/ghr_ tokens and github_pat_ tokens
    secret.openai_key         sk-..., sk-proj-..., mixed case with digits (never sk-ant-)
    secret.anthropic_key      sk-ant-api03-... / sk-ant-admin01-...
    secret.slack_token        xoxb-/xoxp-/xoxa-/xoxr-/xoxs- tokens and hooks.slack.com URLs
    secret.stripe_key         sk_live_/sk_test_/rk_live_/rk_test_ (publishable pk_ keys are public)
    secret.google_api_key     AIza + 35 characters
    secret.private_key        a PEM "BEGIN ... PRIVATE KEY" block, through END or its body's end
    secret.jwt                eyJ....eyJ.... three-part JSON web tokens
    secret.password_in_url    scheme://user:PASSWORD@host (the span is the password)
    secret.password_assignment password/secret/token/api_key/密码 = or : VALUE (span: the value)
    secret.high_entropy       a high-entropy token in credential context (see ``_entropy_ok``),
                              or a bare one that looks generated (see ``_bare_ok``)
    secret.<provider>_...     the provider token formats of ``secret_rules.RULES``

Placeholders (``${VAR}``, ``<password>``, ``{{ vault }}``, ``****``, ``changeme``-style words,
``xoxb-xxxx``), empty values and values named as hashes or ids (``hashed_secret``,
``integrity``, ``sha256:``, ``commit``, ``request_id``) are not findings: they are what
documentation, lockfiles and scanner baselines look like.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import re
from typing import ClassVar

from app.core.detectors.base import PatternDetector, fold_ascii, shannon_entropy
from app.core.detectors.literals import Factor, required_factors
from app.core.detectors.secret_rules import PROVIDER_DETECTORS, generic_ok, token_ok
from app.core.guards.safety import Detector, Finding


def _token_accept(m: re.Match[str], _text: str) -> bool:
    return token_ok(m.group())


def _token_detector(type_: str, *patterns: str) -> PatternDetector:
    return PatternDetector(name=type_, type=type_, action="drop",
                           patterns=tuple(re.compile(p) for p in patterns), accept=_token_accept)


_B = r"(?<![A-Za-z0-9_-])"  # start of a token, never inside one
_E = r"(?![A-Za-z0-9_-])"

AWS_ACCESS_KEY = _token_detector(
    "secret.aws_access_key",
    rf"{_B}(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{{16}}{_E}")
GITHUB_TOKEN = _token_detector(
    "secret.github_token", rf"{_B}gh[pousr]_[A-Za-z0-9]{{36,251}}{_E}",
    rf"{_B}github_pat_[A-Za-z0-9_]{{22,255}}{_E}")
ANTHROPIC_KEY = _token_detector(
    "secret.anthropic_key", rf"{_B}sk-ant-(?:api|admin|sid)\d{{2}}-[A-Za-z0-9_-]{{20,200}}{_E}")
SLACK_TOKEN = _token_detector(
    "secret.slack_token", rf"{_B}xox[abposre]-[A-Za-z0-9-]{{10,200}}{_E}",
    r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,12}/B[A-Z0-9]{6,12}/[A-Za-z0-9]{20,40}")
STRIPE_KEY = _token_detector(
    "secret.stripe_key", rf"{_B}(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{{16,200}}{_E}")
GOOGLE_API_KEY = _token_detector(
    "secret.google_api_key", rf"{_B}AIza[0-9A-Za-z_-]{{35}}{_E}")
JWT = _token_detector(
    "secret.jwt",
    rf"{_B}eyJ[A-Za-z0-9_-]{{8,2000}}\.eyJ[A-Za-z0-9_-]{{8,8000}}\.[A-Za-z0-9_-]{{0,2000}}{_E}")


def _mixed(value: str) -> bool:
    return (any(c.isdigit() for c in value) and any(c.isupper() for c in value)
            and any(c.islower() for c in value))


OPENAI_KEY = PatternDetector(
    name="secret.openai_key", type="secret.openai_key", action="drop",
    patterns=(re.compile(
        rf"{_B}sk-(?!ant-)(?:proj-|svcacct-|admin-)?(?P<body>[A-Za-z0-9_-]{{20,200}}){_E}"),),
    accept=lambda m, _: _mixed(m.group("body")) and token_ok(m.group("body")))

# ---- PEM private keys: one scan for headers, one for footers, then pair them (linear).
_PEM_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END (?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s:,]{0,20000}")  # truncated block: its body, to the next "-"
_PEM_MAX = 20000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PrivateKeyDetector:
    name: str = "secret.private_key"

    @property
    def triggers(self) -> tuple[Factor, ...]:  # every finding starts with a BEGIN line
        return required_factors(_PEM_BEGIN)

    def __call__(self, text: str) -> list[Finding]:
        ends = [m.end() for m in _PEM_END.finditer(text)]
        out: list[Finding] = []
        for m in _PEM_BEGIN.finditer(text):
            i = bisect.bisect_left(ends, m.end())
            if i < len(ends) and ends[i] - m.end() <= _PEM_MAX:
                end = ends[i]
            else:
                body = _PEM_BODY.match(text, m.end())
                end = body.end() if body else m.end()
            out.append(Finding(type="secret.private_key", action="drop", start=m.start(), end=end))
        return out


PRIVATE_KEY = PrivateKeyDetector()

# ---- passwords in URLs and assignments
_PLACEHOLDER = re.compile(
    r"^(?:[$<{%*\[(]|x{3,}$|\.{3}|_{3,})|\.\.\.|…|x{4,}|X{4,}"
    r"|^(?:password|passwd|pass|pwd|secret|token|changeme|example|redacted|hidden|none|null"
    r"|true|false|required|optional|str|string|your[_-]?\w{0,30}|my[_-]?password|placeholder"
    r"|\*+|xxx+|todo|tbd|n/?a|dummy|fake|sample|test|testing|unused|ignored|empty|anything"
    r"|not[_-]?(?:needed|used|set|required)|foo|bar|foobar|abc123|12345678?)$",
    re.IGNORECASE)


def _real_secret(value: str) -> bool:
    return not _PLACEHOLDER.search(value) and len(set(value)) > 2


PASSWORD_IN_URL = PatternDetector(
    name="secret.password_in_url", type="secret.password_in_url", action="drop",
    patterns=(re.compile(
        r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@'\"]{0,128}:"
        r"(?P<pw>[^\s:/@'\"]{1,256})@[A-Za-z0-9\[]"),),
    accept=lambda m, _: _real_secret(m.group("pw")), group="pw")

_KEYWORD = (r"(?:secret[_-]?key|client[_-]?secret|api[_-]?key|apikey|access[_-]?key|auth[_-]?token"
            r"|access[_-]?token|refresh[_-]?token|private[_-]?key|passphrase|password|passwd"
            r"|pwd|secret|token|密码|口令|密钥)")
# ``[ \t]`` around the operator, not ``\s``: ``PASSWORD=`` with nothing after it must not take
# the next line's ``DB_HOST=localhost`` as its value.
_ASSIGN = re.compile(
    rf"{_KEYWORD}[\"']?[ \t]{{0,4}}(?P<op>=>|[:=：]|是|为)[ \t]{{0,4}}(?P<q>[\"']?)"
    r"(?P<value>[^\s\"'`,;<>(){}\[\]]{6,256})")
# ``--password hunter22``, ``--api-key=…``, ``curl -u user:pass``
_FLAG = re.compile(
    r"--(?:[a-z0-9]{1,20}-)?(?:password|passwd|pass|secret|token|api-?key|access-key)"
    r"(?P<op>[ =])(?P<q>[\"']?)(?P<value>[^\s\"'`,;<>(){}\[\]-][^\s\"'`,;<>(){}\[\]]{5,255})")
_CURL_USER = re.compile(
    r"(?:-u|--user)(?P<op>[ =])(?P<q>[\"']?)[^\s:'\"@]{1,64}:(?P<value>[^\s'\"@]{3,128})")
# where a password has no operator: SQL ``IDENTIFIED BY '…'``, ``mysql -p…``, ``redis-cli -a …``,
# ``auth=("user", "…")``, .NET ``<add key="DbPassword" value="…"/>``, netrc and prose
# ``password …`` / ``password is …`` / ``密码 …`` (the last only for values that look generated)
_SQL = re.compile(
    r"identified[ \t]{1,4}by[ \t]{1,4}(?P<op>)(?P<q>['\"])(?P<value>[^'\"\s]{4,128})")
_CLI = re.compile(
    r"(?:mysql|mysqldump|mariadb|redis-cli)[ \t][^\n]{0,80}?[ \t]-(?:p|a[ \t])(?P<op>)"
    r"(?P<q>[\"']?)(?P<value>[^\s\"'-][^\s\"']{3,127})")
_AUTH_TUPLE = re.compile(
    r"auth[ \t]?=[ \t]?\([ \t]?[\"'][^\"'\n]{1,64}[\"'][ \t]?,[ \t]?(?P<op>)(?P<q>[\"'])"
    r"(?P<value>[^\"'\s]{4,128})")
_XML_ADD = re.compile(
    r"key=\"[^\"\n]{0,40}(?:password|passwd|secret|token|apikey|api_key)[^\"\n]{0,20}\""
    r"[ \t]{1,4}value=(?P<op>)(?P<q>\")(?P<value>[^\"\s]{4,256})")
_SPACED = re.compile(
    r"(?:password|passwd|passphrase|密码|口令)(?P<op>[ \t]{1,4}(?:(?:is|was)[ \t]{1,4})?)"
    r"(?P<q>[\"']?)(?P<value>[^\s\"'`,;<>(){}\[\]]{8,128})")
# names of values that are not credentials even next to a credential word: hashes, digests,
# ids, references (``hashed_secret`` in a scanner baseline, ``token_id``, ``key_fingerprint``)
_NOT_CREDENTIAL = re.compile(
    r"hash|sha\d|digest|checksum|integrity|fingerprint|etag|commit|revision|(?:^|[_.-])rev$"
    r"|nonce|uuid|guid|version|(?:^|[_.-])(?:id|ids|ref|url|uri|path|file|name|type|length"
    r"|size)$"
    r"|(?<=[a-z])(?:Id|Ids|Url|Uri|Path|File|Name|Type)$")
_PASSWORD_WORDS = ("pass", "pwd", "secret", "密码", "口令")  # people choose these: any value
_CODE_NAME = re.compile(r"[a-z]+(?:_[a-z]+)+")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _name_at(text: str, end: int) -> str:
    """The identifier ending at ``end`` (at most 60 characters), case kept."""
    start = end
    while start > max(0, end - 60) and text[start - 1] in _NAME_CHARS:
        start -= 1
    return text[start:end]


def _before_quotes(text: str, end: int) -> int:
    """Where the run of quotes and blanks ending at ``end`` starts. Walked back, not
    ``len(text[:end].rstrip(...))``: that copies the text's whole prefix for every match, and
    1 MB of ``password=token: …`` took 6 s (quadratic) instead of milliseconds."""
    while end > 0 and text[end - 1] in "\"' \t":
        end -= 1
    return end


def _names_a_credential(name: str) -> bool:
    return _NOT_CREDENTIAL.search(name) is None or "session" in name.lower()


def _assignment_ok(m: re.Match[str], text: str) -> bool:
    start = m.start()
    if start > 0 and text[start - 1].isascii() and text[start - 1].isalpha() \
            and not text.startswith("-", start):
        return False  # ``mypassword=`` / ``tokens:`` prefixes: not the keyword itself
    value = text[m.start("value"):m.end("value")]
    if not _real_secret(value) or re.fullmatch(r"[A-Za-z_]\w{0,60}(?:\.\w{1,60}){1,6}", value):
        return False  # a placeholder, or code (``settings.DB_PASSWORD``)
    if not _names_a_credential(_name_at(text, _before_quotes(text, m.start("op")))):
        return False  # ``hashed_secret: …``, ``token_id = …``
    if not m.group("q") and _CODE_NAME.fullmatch(value):
        return False  # ``password = auth_from_netrc``: an expression, not a literal
    keyword = text[start:m.start("op")].lower()
    if m.re in (_ASSIGN, _FLAG) and not any(w in keyword for w in _PASSWORD_WORDS) \
            and (not any(c.isdigit() for c in value) or not generic_ok(value)):
        return False  # a token or key has digits: ``"upgrade_token": "upgrades"`` is a label
    if text.endswith(".svg?", 0, start):
        return False  # a coverage badge's read-only graph token, published in READMEs
    if m.re is _SPACED:  # "password policy", "password 2 weeks ago": prose, unless generated
        return _generated(value)
    if m.group("q") or m.group("op") == "=":
        return True
    # ``key: value`` in prose ("your token: expires soon") needs a value that looks generated
    return len(value) >= 12 or any(not c.isalpha() for c in value)


def _generated(value: str) -> bool:
    """Letters with digits or symbols, in two cases or with a symbol: ``vtmxN%kYCLXX``,
    ``f81531c8-0566-…``; not ``policy``, ``2FA``, ``14``."""
    kinds = (any(c.islower() for c in value), any(c.isupper() for c in value),
             any(c.isdigit() for c in value), any(not c.isalnum() for c in value))
    return kinds[0] + kinds[1] >= 1 and sum(kinds) >= 3


PASSWORD_ASSIGNMENT = PatternDetector(
    name="secret.password_assignment", type="secret.password_assignment", action="drop",
    patterns=(_ASSIGN, _FLAG, _CURL_USER, _SQL, _CLI, _AUTH_TUPLE, _XML_ADD, _SPACED),
    accept=_assignment_ok, group="value", fold=True)

# ---- high-entropy tokens: next to a credential word on the same line, or bare and generated
# A token may follow ``=`` (``BOX_KEY=…``); it is never the inside of a longer run.
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,200}={0,2}(?![A-Za-z0-9+/=_-])")
# Lower-case, run on the folded window: ``re.IGNORECASE`` would also take the Kelvin sign for
# ``k``, which no byte-level prefilter sees (``app.core.detectors.literals``).
_CONTEXT = re.compile(
    r"(?:key|token|secret|passw|pwd|credential|auth|bearer|session|cookie|signature|密钥|令牌|凭证)")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_PUBLIC = re.compile(r"pk_(?:live|test)_|phc_")  # publishable keys are meant for browsers
# a digest written with its algorithm (SRI ``sha512-…``, ``sha256:…``, go.sum ``h1:…``), a
# password hash (bcrypt, argon2), a data URI's payload, an SSH public key
_DIGEST_BEFORE = re.compile(
    r"(?:sha\d{1,3}|md5|h1)[:~-]$|base64,$|\$2[aby]?\$\d\d\$$|\$argon2\w{0,2}\$\S{0,40}\$$"
    r"|\$(?:1|5|6|y|apr1)\$(?:rounds=\d{1,7}\$)?[^\s$]{0,40}\$$"
    r"|(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d{3}|sk-ssh-ed25519@openssh\.com) $", re.ASCII)
_DIGEST_TOKEN = re.compile(r"(?:sha\d{1,3}|md5)-", re.ASCII)
_SLUG = re.compile(r"[a-z][a-z0-9]*(?:[_-](?:[a-z]+|[0-9]+)){2,}", re.ASCII)
_PATH = re.compile(r"[a-z0-9_.-]*(?:/[a-z0-9_.-]*){2,}", re.ASCII)
_OBJECT_ID = re.compile(r"[a-z]{1,8}_", re.ASCII)  # ``pi_3Mtw…``, ``evt_1…``: an API object
_CONTEXT_CHARS = 40


def _entropy_ok(token: str) -> bool:
    if _UUID.fullmatch(token) or _PUBLIC.match(token) or _DIGEST_TOKEN.match(token) \
            or not any(c.isdigit() for c in token) or not generic_ok(token):
        return False
    if all(c in "0123456789abcdefABCDEF" for c in token):
        return len(token) >= 32 and shannon_entropy(token) >= 3.0
    if _SLUG.fullmatch(token) or _PATH.fullmatch(token):
        return False  # ``bm25s_very_big_index``, ``projects/acme/secrets/db``: words, not a key
    return any(c.isalpha() for c in token) and shannon_entropy(token) >= 3.7


_BARE_MIN = 24
_SEPARATORS = re.compile(r"[-_]")


def _class(c: str) -> int:
    return 0 if c.isdigit() else 1 if c.isupper() else 2 if c.islower() else 3


def _bare_ok(token: str) -> bool:
    """A token with no credential word before it counts only when it looks generated: 24+
    characters of mixed case with digits, no path (``/``), not hex, and characters whose class
    (upper, lower, digit) changes at least every third step. Identifiers (``UserProfile2Form``)
    change class once a word; random base62 changes at 62% of steps."""
    body = token.rstrip("=")
    if len(body) < _BARE_MIN or "/" in body or body.startswith("eyJ") \
            or _OBJECT_ID.match(body) or not _entropy_ok(token):
        return False  # too short, a path, base64 JSON (a real JWT is ``secret.jwt``), an id
        # with its type prefix (tokens with a prefix are ``secret_rules``' business)
    if all(c in "0123456789abcdefABCDEF-" for c in body):
        return False  # digests, SHAs, UUIDs: hex is never a bare secret
    if max(map(len, _SEPARATORS.split(body))) < max(12, len(body) // 3):
        return False  # words joined by separators (``CANARY-v-session-1695a6c2``): random
        # base64url puts a ``-``/``_`` in one character of 32, so its runs are long
    if sum(c.isupper() for c in body) < 2 or sum(c.islower() for c in body) < 2 \
            or sum(c.isdigit() for c in body) < 2:
        return False
    changes = sum(_class(a) != _class(b) for a, b in itertools.pairwise(body))
    return changes >= 0.35 * (len(body) - 1) and shannon_entropy(body) >= 4.0


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:$")


def _line_window(text: str, start: int) -> str:
    line_start = text.rfind("\n", max(0, start - _CONTEXT_CHARS), start) + 1
    return text[max(line_start, start - _CONTEXT_CHARS):start]


_VALUE_LINE = re.compile(r"[ \t]*(?:-[ \t]*)?value[ \t]*[:=][ \t]*[\"']?")


def _in_context(text: str, start: int) -> bool:
    window = _line_window(text, start)
    if _VALUE_LINE.fullmatch(window):  # ``- name: API_SECRET`` / ``  value: …`` (Kubernetes env)
        window = _line_window(text, start - len(window) - 1) + window
    if text.startswith("//", start):  # a URI's path: its scheme ("session:") is no context
        window = _SCHEME.sub("", window)
    return _CONTEXT.search(fold_ascii(window)) is not None


_ASSIGNED = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]{0,60})[\"']?[ \t]{0,3}(?:=>|:=|[=:])")


def _value_name(window: str) -> str:
    """The name a value is assigned to: the last ``name =``/``name:`` in the window before it
    (``password_hash: $2b$…`` names the hash, not the ``$2b$`` prefix)."""
    last = ""
    for m in _ASSIGNED.finditer(window):
        last = m.group(1)
    return last


_ARMOR = re.compile(r"-----(?:BEGIN|END) [A-Z0-9 ]{1,40}-----")


def _armored(text: str) -> tuple[list[int], list[int]]:
    """Starts and ends of ASCII-armored blocks (certificates, public keys: base64 lines that
    are not secrets; private keys are ``secret.private_key`` already), in one linear scan."""
    starts: list[int] = []
    ends: list[int] = []
    for m in _ARMOR.finditer(text):
        if m.group().startswith("-----BEGIN"):
            starts.append(m.end())
        else:
            ends.append(m.start())
    return starts, ends


def _inside(armored: tuple[list[int], list[int]], pos: int) -> bool:
    starts, ends = armored
    i = bisect.bisect_right(starts, pos)
    if not i:
        return False
    j = bisect.bisect_left(ends, starts[i - 1])  # the first END after that BEGIN
    return j == len(ends) or ends[j] > pos


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class HighEntropyDetector:
    """``bare``: also report generated-looking tokens with no credential word before them
    (``_bare_ok``); such a detector runs on every text (it declares no trigger literals)."""

    name: str = "secret.high_entropy"
    bare: bool = False

    fold: ClassVar[bool] = True  # its credential words are looked for in a folded window

    @property
    def triggers(self) -> tuple[Factor, ...] | None:  # a finding needs a credential word
        return None if self.bare else required_factors(_CONTEXT)

    def __call__(self, text: str) -> list[Finding]:
        out: list[Finding] = []
        armored = _armored(text) if self.bare else ([], [])
        for m in _CANDIDATE.finditer(text):
            token, window = m.group(), _line_window(text, m.start())
            if _DIGEST_BEFORE.search(window) or not _names_a_credential(_value_name(window)) \
                    or (window.endswith(".") and "/" in token):
                continue  # a digest, a hash or id field, a URL's path after its host
            context = _in_context(text, m.start())
            if (context and _entropy_ok(token)) if not self.bare else \
                    (not context and text[m.start() - 1:m.start()] != "/" and _bare_ok(token)
                     and not _inside(armored, m.start())):
                out.append(Finding(type="secret.high_entropy", action="drop",
                                   start=m.start(), end=m.end()))
        return out


HIGH_ENTROPY = HighEntropyDetector()
BARE_TOKEN = HighEntropyDetector(name="secret.high_entropy.bare", bare=True)

SECRET_DETECTORS: tuple[Detector, ...] = (
    AWS_ACCESS_KEY, GITHUB_TOKEN, OPENAI_KEY, ANTHROPIC_KEY, SLACK_TOKEN, STRIPE_KEY,
    GOOGLE_API_KEY, PRIVATE_KEY, JWT, PASSWORD_IN_URL, PASSWORD_ASSIGNMENT, HIGH_ENTROPY,
    BARE_TOKEN, *PROVIDER_DETECTORS)
