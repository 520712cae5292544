"""One test case per provider rule: a token made from the rule's own parts (random, seeded) is
found by that rule's type, in config and bare positions, with its exact span; the same shape
with a placeholder body, or glued inside a longer token, is not; every pattern gives the
prefilter a literal to gate it by. Plus the generic positions and suppressions of
``secrets.py`` that the issue named (``BOX_KEY=…``, ``hashed_secret``, empty values).
"""

from __future__ import annotations

import random
import re

import pytest

from app.core.detectors import SECRET_DETECTORS
from app.core.detectors.literals import required_factors, strength
from app.core.detectors.prefilter import Prefiltered
from app.core.detectors.secret_rules import PROVIDER_DETECTORS, RULES, Rule, token_ok

SCAN = Prefiltered(SECRET_DETECTORS)


def _alphabet(cls: str) -> str:
    """The characters of a regex class body (ranges, ``\\-`` escapes, single characters)."""
    out, i = [], 0
    while i < len(cls):
        if cls[i] == "\\":
            out.append(cls[i + 1])
            i += 2
        elif i + 2 < len(cls) and cls[i + 1] == "-":
            out.extend(map(chr, range(ord(cls[i]), ord(cls[i + 2]) + 1)))
            i += 3
        else:
            out.append(cls[i])
            i += 1
    return "".join(out)


def example(rule: Rule, seed: int) -> str:
    """A token of the rule's shape that is no placeholder (retried until ``token_ok``)."""
    rng = random.Random(seed)
    while True:
        token = "".join(
            p if isinstance(p, str) else
            "".join(rng.choice(_alphabet(p[0])) for _ in range(rng.randint(p[1], p[2])))
            for p in rule.parts)
        m = re.fullmatch(rule.pattern, token)
        if m and token_ok(m.group("body")):
            return token


def _id(rule: Rule) -> str:
    return f"{rule.type}:{next(p for p in rule.parts if isinstance(p, str))}"


def _types(text: str) -> set[str]:
    return {f.type for f in SCAN(text)}


@pytest.mark.parametrize("i", range(len(RULES)), ids=[_id(r) for r in RULES])
def test_each_rule_finds_its_own_token(i: int) -> None:
    rule = RULES[i]
    token = example(rule, seed=i)
    for text in (f"TOKEN={token}\n", f'{{"value": "{token}"}}', f"here it is: {token} ok",
                 f"{token}"):
        spans = [(f.start, f.end) for f in SCAN(text) if f.type == rule.type]
        start = text.index(token)
        assert (start, start + len(token)) in spans, (text, _types(text))


@pytest.mark.parametrize("i", range(len(RULES)), ids=[_id(r) for r in RULES])
def test_each_rule_ignores_placeholders_and_longer_runs(i: int) -> None:
    rule = RULES[i]
    placeholder = "".join(p if isinstance(p, str) else "x" * p[2] for p in rule.parts)
    assert rule.type not in _types(f"TOKEN={placeholder}"), placeholder
    glued = "Q" + example(rule, seed=i) + "Q"  # inside a longer run: never a token
    assert not [f for f in SCAN(glued) if f.type == rule.type and f.start == 1]


def test_every_provider_pattern_is_gated_by_a_literal() -> None:
    for d in PROVIDER_DETECTORS:
        for pattern in d.patterns:
            factors = required_factors(pattern)
            # one literal of 3+ bytes, or several short ones that must all occur (Asana's
            # ``2/<digits>/<digits>:<hex>``); Twilio's ``SK`` + 32 hex has only its prefix,
            # and the regex it gates is a fixed-width, bounded one
            assert factors and (max(strength(f)[0] for f in factors) >= 3
                                or len(factors) >= 3
                                or d.type == "secret.twilio_key"), pattern.pattern


@pytest.mark.parametrize(("text", "found"), [
    ("BOX_KEY=Tq8vR2mXc7LpW4zN9bKd3HsY6fGj1AeU", True),  # key alone is no keyword: entropy is
    ("export DIGITALOCEAN_TOKEN=dop_v1_" + "7c1e" * 16, True),
    ("SLACK_REFRESH_TOKEN=xoxe-1-" + "Ab3dE5gH7jK9" * 12 + "Ab", True),
    ("STRIPE_KEY=sk_prod_4Kp9Qz2Lm7Xv3Bn8Wc1Rt6Yh", True),
    ("--api-key 9fQ2xL7mV4kR8zT1wB6nC3pH", True),
    ("--password hunter22", True),
    ("curl -u deploy:Xk9mQ2pL7v https://ci.internal/api", True),
    ("CREATE USER app IDENTIFIED BY 'Rz8!qWm2Lp';", True),
    ("machine api.internal\n  password Wq8!zP3rLk", True),
    ("- name: API_SECRET\n  value: 'Rz8Tq2LmXv7Kp4Wc9BnY3hFd'", True),
    ("the box token Tq8vR2mXc7LpW4zN9bKd3HsY6fGj1AeU expires at noon", True),
    ("SLACK_BOT_TOKEN=xoxb-xxxxxxxxxxxx-xxxxxxxxxxxxx-xxxxxxxxxxxxxxxxxxxxxxxx", False),
    ('"hashed_secret": "1f3e5a7c9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a"', False),
    ("PASSWORD=\nDB_HOST=db.internal", False),
    ('API_KEY=""', False),
    ('"integrity": "sha512-Qm9vL2Jhci9iYXo9PT0+ZXhhbXBsZS9ub3QvYS9zZWNyZXQv'
     'YXQvYWxsLzEyMzQ1Njc4OTA="', False),
    ("commit 3f2a1b4c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a", False),
    ("CANARY-v-session-1695a6c2 refund timeout notes", False),  # words and an id suffix
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", True),  # made up, but shaped
    ("request_id=8d3f9c2e-4b1a-4f6e-9c8d-7b6a5f4e3d2c", False),
    ("Payment pi_3MtwBwLkdIwHu7ix28a3tqPa succeeded", False),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq8Rz2Lm7Xv3Bn8Wc1Rt6YhKp4 dana@laptop", False),
    ("password_hash: $2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW", False),
    ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", False),
    ("tokenizer.save_vocab(save_dir=\"bm25s_very_big_index\")", False),
    ("password = auth_from_netrc", False),
    ("the password policy requires 14 characters", False),
])
def test_generic_positions_and_suppressions(text: str, found: bool) -> None:
    assert bool(SCAN(text)) is found, (text, _types(text))
