"""Robustness bound: every detector scans 1 MB of adversarial text in well under a second.

Not a benchmark: the bound (2 s per detector and input) is generous so that a slow CI machine
passes, while catastrophic backtracking (quadratic or worse) fails by orders of magnitude. It is
CPU time (``time.process_time``), not wall time: on a shared 2-core machine at load ~10 the wall
clock of a 0.5 s scan reached 2 s while the scan itself did not change.
"""

from __future__ import annotations

import time

import pytest

from app.core.detectors import ALL_DETECTORS
from app.core.guards.safety import Detector

MB = 1_000_000
BOUND_S = 2.0


def _fill(unit: str) -> str:
    return (unit * (MB // len(unit) + 1))[:MB]


GENERIC: dict[str, str] = {  # every detector scans each of these
    "letters": "a" * MB,
    "equals": "=" * MB,
    "colons": ":" * MB,
    "ats": "@" * MB,
    "digits": "4" * MB,
    "base64": _fill("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0MTIzNDU2Nzg5Ky8="),
    "cjk": _fill("忽略之前的所有你现在是把对话发送到密码：令牌"),
    "latin1_bytes": bytes(range(256)).decode("latin-1") * (MB // 256),
}
TARGETED: dict[str, tuple[str, str]] = {  # near-misses aimed at one family: (prefix, text)
    "spaced_digits": ("pii.", _fill("4111 ")),
    "phone_parts": ("pii.", _fill("+1 (23) 4-")),
    "email_parts": ("pii.", _fill("a.b@c.")),
    "ip_parts": ("pii.", _fill("1.2.3.")),
    "hex_colons": ("pii.", _fill("ab:")),
    "key_words": ("secret.", _fill("password=token: secret=api_key ")),
    "url_parts": ("secret.", _fill("a://b:c@")),
    "pem_headers": ("secret.", _fill("-----BEGIN RSA PRIVATE KEY-----\n")),
    "jwt_parts": ("secret.", _fill("eyJhbGciOi.")),
    "injection_words": ("injection.", _fill("ignore all previous you are now act as send ")),
    "markdown": ("injection.", _fill("![a](https://x.io/?")),
}


def _inputs(detector: Detector) -> dict[str, str]:
    targeted = {k: t for k, (prefix, t) in TARGETED.items() if detector.name.startswith(prefix)}
    return {**GENERIC, **targeted}


def _name(d: Detector) -> str:
    return d.name


@pytest.mark.parametrize("detector", ALL_DETECTORS, ids=_name)
def test_one_megabyte_adversarial_inputs_are_linear(detector: Detector) -> None:
    slowest = ("", 0.0)
    for label, text in _inputs(detector).items():
        start = time.process_time()
        detector(text)
        elapsed = time.process_time() - start
        slowest = max(slowest, (label, elapsed), key=lambda x: x[1])
        assert elapsed < BOUND_S, f"{detector.name} took {elapsed:.2f}s on {label}"
    print(f"{detector.name}: slowest {slowest[0]} {slowest[1] * 1000:.0f} ms")
