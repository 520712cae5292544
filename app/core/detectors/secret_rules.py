"""Provider token formats: one rule per documented token shape, a literal prefix and a body.

Contract: ``RULES`` is a table of ``Rule(type, parts)``; ``parts`` alternate literals and
``(character class, min, max)`` runs, so a rule is both a linear pattern (``Rule.pattern``:
a start guard, the literal first, bounded runs, an end guard) and a generator of examples
(``tests/unit/test_secret_rules.py`` builds a random token per rule and checks that exactly
that rule's type finds it). ``PROVIDER_DETECTORS`` groups the rules by type into
``PatternDetector``s; each pattern has its literal prefix as a required factor, so behind
``Prefiltered`` a rule costs nothing on a text without its prefix.

Sources: the providers' documentation of their token formats, and the list of providers and
prefixes in gitleaks' default configuration (``config/gitleaks.toml``, MIT licence,
Copyright (c) 2019 Zachary Rice), rewritten here with bounded quantifiers; no example token
of gitleaks or of any other scanner is used. Keyword-only rules of that list ("a 32-char
value near the word *adafruit*") are left to the generic assignment and entropy detectors
in ``secrets.py``, which read the same ``name=value`` positions.

A match whose body looks like a placeholder (``xxxx``, five equal characters in a row,
``abcdef``/``123456`` runs) is not a finding (``token_ok``).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict

from app.core.detectors.base import PatternDetector

Run = tuple[str, int, int]  # (regex character class body, min, max)
_CAPS = "A-Z0-9"  # a run of this class must hold a digit (``_element``)
Part = str | Run

_START = r"(?<![A-Za-z0-9_+/.-])"  # not inside a longer token (``=`` may precede one)
_END = r"(?![A-Za-z0-9_+/=-])"


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    type: str
    parts: tuple[Part, ...]

    @property
    def pattern(self) -> str:
        """Its parts between the guards; ``body`` is what follows a leading literal (checked
        for placeholders: Twitter's bearer tokens start with twenty ``A``)."""
        lead = re.escape(self.parts[0]) if isinstance(self.parts[0], str) else ""
        rest = self.parts[1:] if lead else self.parts
        return f"{_START}{lead}(?P<body>{''.join(map(_element, rest))}){_END}"


def _element(part: Part) -> str:
    """A literal, or a bounded run; a run of capitals and digits must contain a digit (a
    bounded lookahead), so ``API-`` + 26 capitals of a constant's name is not a token."""
    if isinstance(part, str):
        return re.escape(part)
    cls, low, high = part
    run = f"[{cls}]{{{low},{high}}}"
    if cls == _CAPS:
        return f"(?=[A-Z]{{0,{high - 1}}}[0-9]){run}"
    return run


def _r(type_: str, *parts: Part) -> Rule:
    return Rule(f"secret.{type_}", parts)


AN = "A-Za-z0-9"
AN_ = "A-Za-z0-9_\\-"
HEX = "a-f0-9"
B64 = "A-Za-z0-9+/"

RULES: tuple[Rule, ...] = (
    # --- source hosting, CI, registries
    _r("gitlab_token", "glpat-", (AN_, 20, 20)),
    _r("gitlab_token", "glpat-", (AN_, 27, 300), ".", ("a-z0-9", 9, 9)),
    _r("gitlab_token", "glptt-", (HEX, 40, 40)),
    _r("gitlab_token", "GR1348941", (AN_, 20, 20)),
    _r("gitlab_token", "glrt-", (AN_, 20, 300)),
    _r("gitlab_token", "gldt-", (AN_, 20, 20)),
    _r("gitlab_token", "glft-", (AN_, 20, 20)),
    _r("gitlab_token", "glimt-", (AN_, 25, 25)),
    _r("gitlab_token", "glagent-", (AN_, 50, 50)),
    _r("gitlab_token", "gloas-", (AN_, 64, 64)),
    _r("gitlab_token", "glcbt-", (AN, 1, 5), "_", (AN_, 20, 20)),
    _r("gitlab_token", "glsoat-", (AN_, 20, 20)),
    _r("gitlab_token", "glffct-", (AN_, 20, 20)),
    _r("bitbucket_token", "ATBB", (AN, 32, 32)),
    _r("atlassian_token", "ATATT3", (AN_ + "=", 150, 300)),
    _r("npm_token", "npm_", (AN, 36, 36)),
    _r("pypi_token", "pypi-AgEIcHlwaS5vcmc", (AN_, 50, 1000)),
    _r("pypi_token", "pypi-AgENdGVzdC5weXBpLm9yZw", (AN_, 50, 1000)),
    _r("rubygems_token", "rubygems_", (HEX, 48, 48)),
    _r("clojars_token", "CLOJARS_", ("a-z0-9", 60, 60)),
    _r("docker_token", "dckr_pat_", (AN_, 27, 27)),
    _r("circleci_token", "CCIPAT_", (AN, 22, 22), "_", (HEX, 40, 40)),
    _r("buildkite_token", "bkua_", (HEX, 40, 40)),
    _r("artifactory_token", "AKCp", (AN, 69, 69)),
    _r("artifactory_token", "cmVmd", (AN, 59, 59)),
    _r("sourcegraph_token", "sgp_", (HEX, 16, 16), "_", (HEX, 40, 40)),
    _r("sourcegraph_token", "sgp_", (HEX, 40, 40)),
    _r("octopus_token", "API-", (_CAPS, 26, 26)),
    _r("postman_token", "PMAK-", (HEX, 24, 24), "-", (HEX, 34, 34)),
    _r("readme_token", "rdme_", ("a-z0-9", 70, 70)),
    _r("snyk_token", "snyk_", ("a-z0-9", 2, 3), "_", (AN_, 30, 120)),
    # --- clouds and hosting
    _r("digitalocean_token", "dop_v1_", (HEX, 64, 64)),
    _r("digitalocean_token", "doo_v1_", (HEX, 64, 64)),
    _r("digitalocean_token", "dor_v1_", (HEX, 64, 64)),
    _r("alibaba_key", "LTAI", (AN, 20, 24)),
    _r("tencent_key", "AKID", (AN, 32, 32)),
    _r("azure_storage_key", "AccountKey=", (B64, 86, 86), "=="),
    _r("azure_client_secret", (AN + "_~.", 3, 3), ("0-9", 1, 1), "Q~", (AN_ + "~.", 31, 34)),
    _r("cloudflare_key", "v1.0-", (HEX, 24, 24), "-", (HEX, 146, 146)),
    _r("flyio_token", "fo1_", (AN_, 43, 43)),
    _r("flyio_token", "fm2_", (B64, 100, 2000)),
    _r("heroku_key", "HRKU-AA", (AN_, 58, 58)),
    _r("netlify_token", "nfp_", (AN, 36, 40)),
    _r("render_token", "rnd_", (AN, 32, 32)),
    _r("supabase_token", "sbp_", (HEX, 40, 40)),
    _r("supabase_token", "sb_secret_", (AN_, 31, 64)),
    _r("planetscale_token", "pscale_tkn_", (AN_ + ".=", 32, 64)),
    _r("planetscale_token", "pscale_oauth_", (AN_ + ".=", 32, 64)),
    _r("planetscale_token", "pscale_pw_", (AN_ + ".=", 32, 64)),
    _r("pulumi_token", "pul-", (HEX, 40, 40)),
    _r("terraform_token", ("a-z0-9", 14, 14), ".atlasv1.", (AN_ + "=", 60, 70)),
    _r("vault_token", "hvs.", (AN_, 90, 120)),
    _r("vault_token", "hvb.", (AN_, 138, 300)),
    _r("scalingo_token", "tk-us-", (AN_, 48, 48)),
    _r("infracost_token", "ico-", (AN, 32, 32)),
    _r("doppler_token", "dp.pt.", (AN, 43, 43)),
    _r("doppler_token", "dp.st.", (AN_ + ".", 43, 80)),
    _r("doppler_token", "dp.sa.", (AN, 43, 43)),
    _r("doppler_token", "dp.ct.", (AN, 43, 43)),
    _r("openshift_token", "sha256~", (AN_, 43, 43)),
    _r("age_secret_key", "AGE-SECRET-KEY-1", ("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58, 58)),
    _r("onepassword_token", "ops_eyJ", (B64, 250, 2000)),
    # --- AI providers (OpenAI-style keys that the openai_key detector does not take)
    _r("openai_key", "sk-or-v1-", (HEX, 64, 64)),
    _r("openai_key", "sk-lf-", (HEX + "\\-", 36, 36)),
    _r("openai_key", "sk-", (HEX, 32, 32)),
    _r("huggingface_token", "hf_", ("A-Za-z", 34, 34)),
    _r("huggingface_token", "api_org_", ("A-Za-z", 34, 34)),
    _r("xai_key", "xai-", (AN, 80, 80)),
    _r("groq_key", "gsk_", (AN, 52, 52)),
    _r("replicate_token", "r8_", (AN, 37, 37)),
    _r("perplexity_key", "pplx-", (AN, 48, 48)),
    _r("langsmith_key", "lsv2_pt_", (HEX, 32, 32), "_", (HEX, 10, 10)),
    _r("langsmith_key", "lsv2_sk_", (HEX, 32, 32), "_", (HEX, 10, 10)),
    _r("pinecone_key", "pcsk_", (AN_, 50, 90)),
    # --- payments and commerce
    _r("plaid_token", "access-sandbox-", (HEX + "\\-", 36, 36)),
    _r("plaid_token", "access-development-", (HEX + "\\-", 36, 36)),
    _r("plaid_token", "access-production-", (HEX + "\\-", 36, 36)),
    _r("stripe_key", "whsec_", (AN, 32, 64)),
    _r("square_token", "sq0atp-", (AN_, 22, 60)),
    _r("square_token", "sq0csp-", (AN_, 43, 43)),
    _r("square_token", "EAAA", (AN_, 60, 60)),
    _r("shopify_token", "shpat_", ("a-fA-F0-9", 32, 32)),
    _r("shopify_token", "shpca_", ("a-fA-F0-9", 32, 32)),
    _r("shopify_token", "shppa_", ("a-fA-F0-9", 32, 32)),
    _r("shopify_token", "shpss_", ("a-fA-F0-9", 32, 32)),
    _r("flutterwave_key", "FLWSECK_TEST-", (HEX, 32, 32), "-X"),
    _r("flutterwave_key", "FLWSECK-", (HEX, 32, 32), "-X"),
    _r("duffel_token", "duffel_test_", (AN_ + "=", 43, 43)),
    _r("duffel_token", "duffel_live_", (AN_ + "=", 43, 43)),
    _r("easypost_token", "EZAK", (AN, 54, 54)),
    _r("easypost_token", "EZTK", (AN, 54, 54)),
    _r("shippo_token", "shippo_live_", ("a-fA-F0-9", 40, 40)),
    _r("shippo_token", "shippo_test_", ("a-fA-F0-9", 40, 40)),
    _r("braintree_token", "access_token$production$", ("a-z0-9", 16, 16), "$", (HEX, 32, 32)),
    _r("braintree_token", "access_token$sandbox$", ("a-z0-9", 16, 16), "$", (HEX, 32, 32)),
    # --- messaging, e-mail, communication
    _r("slack_token", "xoxe.xoxb-", ("0-9", 1, 1), "-", (AN, 150, 170)),
    _r("slack_token", "xoxe.xoxp-", ("0-9", 1, 1), "-", (AN, 150, 170)),
    _r("slack_token", "xoxe-", ("0-9", 1, 1), "-", (AN, 140, 160)),
    _r("slack_token", "xapp-", ("0-9", 1, 1), "-", (_CAPS, 8, 14), "-", ("0-9", 10, 16),
       "-", ("a-f0-9", 40, 80)),
    _r("slack_token", "https://hooks.slack.com/workflows/", (AN + "/", 30, 80)),
    _r("slack_token", "https://hooks.slack.com/triggers/", (AN + "/", 30, 80)),
    _r("sendgrid_key", "SG.", (AN_, 22, 22), ".", (AN_, 43, 43)),
    _r("sendinblue_key", "xkeysib-", (HEX, 64, 64), "-", (AN, 16, 16)),
    _r("mailgun_key", "key-", (HEX, 32, 32)),
    _r("mailchimp_key", (HEX, 32, 32), "-us", ("0-9", 1, 2)),
    _r("twilio_key", "SK", (HEX, 32, 32)),
    _r("telegram_bot_token", ("0-9", 8, 10), ":AA", (AN_, 33, 33)),
    _r("discord_webhook", "https://discord.com/api/webhooks/", ("0-9", 17, 20), "/", (AN_, 60, 80)),
    _r("teams_webhook", "https://", ("a-z0-9", 1, 40), ".webhook.office.com/webhookb2/",
       (HEX + "@\\-", 73, 73), "/IncomingWebhook/", (HEX, 32, 32), "/", (HEX + "\\-", 36, 36)),
    # --- SaaS APIs
    _r("linear_key", "lin_api_", (AN, 40, 40)),
    _r("launchdarkly_key", "sdk-", (HEX + "\\-", 36, 36)),
    _r("launchdarkly_key", "api-", (HEX + "\\-", 36, 36)),
    _r("notion_token", "ntn_", ("0-9", 11, 11), (AN, 35, 35)),
    _r("notion_token", "secret_", (AN, 43, 43)),
    _r("airtable_token", "pat", (AN, 14, 14), ".", (HEX, 64, 64)),
    _r("figma_token", "figd_", (AN_, 40, 45)),
    _r("contentful_token", "CFPAT-", (AN_, 43, 43)),
    _r("hubspot_token", "pat-na1-", (HEX + "\\-", 36, 36)),
    _r("hubspot_token", "pat-eu1-", (HEX + "\\-", 36, 36)),
    _r("asana_token", "2/", ("0-9", 10, 20), "/", ("0-9", 10, 20), ":", (HEX, 32, 32)),
    _r("newrelic_key", "NRAK-", (_CAPS, 27, 27)),
    _r("newrelic_key", "NRII-", (AN_, 32, 32)),
    _r("newrelic_key", "NRJS-", (HEX, 19, 19)),
    _r("dynatrace_token", "dt0c01.", (_CAPS, 24, 24), ".", (_CAPS, 64, 64)),
    _r("sentry_token", "sntryu_", (HEX, 64, 64)),
    _r("sentry_token", "sntrys_eyJ", (B64 + "=_", 80, 400)),
    _r("grafana_token", "glc_", (B64, 32, 400)),
    _r("grafana_token", "glsa_", (AN, 32, 32), "_", ("a-fA-F0-9", 8, 8)),
    _r("grafana_token", "eyJrIjoi", (AN, 70, 400)),
    _r("posthog_key", "phx_", (AN, 43, 43)),
    _r("prefect_token", "pnu_", (AN, 36, 36)),
    _r("typeform_token", "tfp_", (AN_ + ".=", 59, 59)),
    _r("frameio_token", "fio-u-", (AN_ + "=", 64, 64)),
    _r("adobe_secret", "p8e-", (AN, 32, 32)),
    _r("maxmind_key", (AN, 6, 6), "_", (AN, 29, 29), "_mmk"),
    _r("settlemint_token", "sm_pat_", (AN, 16, 16)),
    _r("settlemint_token", "sm_aat_", (AN, 16, 16)),
    _r("settlemint_token", "sm_sat_", (AN, 16, 16)),
    _r("dropbox_token", "sl.", (AN_ + ".", 130, 1500)),
    _r("mapbox_token", "sk.eyJ", (AN_ + ".", 60, 300)),
    _r("facebook_token", "EAAC", (AN, 100, 400)),
    _r("facebook_token", "EAAM", (AN, 100, 400)),
    _r("twitter_bearer_token", "AAAAAAAAAAAAAAAAAAAA", ("A-Za-z0-9%", 60, 120)),
    _r("google_oauth_secret", "GOCSPX-", (AN_, 28, 28)),
    _r("google_oauth_token", "ya29.", (AN_, 30, 2000)),
    _r("firebase_key", "AAAA", (AN_, 7, 7), ":APA91b", (AN_, 130, 140)),
    _r("salesforce_token", "00D", (AN, 12, 12), "!", (AN + "._", 80, 120)),
)

_PLACEHOLDER_RUN = re.compile(r"(.)\1{4}|xxx|XXX|EXAMPLE|<|>|\*\*\*")
_SEQUENTIAL_RUN = re.compile(r"abcdef|ABCDEF|123456")


def token_ok(token: str) -> bool:
    """Not a documentation placeholder: no ``xxx``, no five equal characters in a row, no
    ``EXAMPLE`` (AWS's documented ``AKIAIOSFODNN7EXAMPLE`` and its secret key). Enough for a
    provider-shaped token: its prefix already says it is a credential, and made-up test
    tokens (``xoxb-123456789012-…``) are what scanners' own corpora hold as positives."""
    return _PLACEHOLDER_RUN.search(token) is None


def generic_ok(token: str) -> bool:
    """A bare high-entropy candidate has no prefix to vouch for it, so an ``abcdef``/``123456``
    run also marks it as made up (a random token has one with probability < 1e-3)."""
    return token_ok(token) and _SEQUENTIAL_RUN.search(token) is None


def _accept(m: re.Match[str], _text: str) -> bool:
    return token_ok(m.group("body"))


def _patterns() -> dict[str, list[str]]:
    by_type: dict[str, list[str]] = defaultdict(list)
    for rule in RULES:
        by_type[rule.type].append(rule.pattern)
    return by_type


PROVIDER_DETECTORS: tuple[PatternDetector, ...] = tuple(
    PatternDetector(name=type_, type=type_, action="drop",
                    patterns=tuple(re.compile(p) for p in patterns), accept=_accept)
    for type_, patterns in sorted(_patterns().items()))
