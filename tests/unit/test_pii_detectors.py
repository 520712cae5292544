"""The personal-data detectors' promises that a labelled set states only by example."""

from __future__ import annotations

import time

import phonenumbers
import pytest

from app.core.detectors import PII_DETECTORS
from app.core.detectors.phone import NO_TRUNK, PHONE, TRUNK_ZERO, VALIDATIONS
from app.core.detectors.pii import iban_ok


def spans(text: str) -> list[tuple[str, str]]:
    return [(f.type, text[f.start:f.end]) for d in PII_DETECTORS for f in d(text)]


def test_region_tables_match_the_numbering_metadata() -> None:
    for region, cc, trunk in TRUNK_ZERO + NO_TRUNK:
        md = phonenumbers.PhoneMetadata.metadata_for_region(region)
        assert md is not None and md.country_code == cc
        assert (md.national_prefix or "") == trunk or region == "IT"  # Italy dials its 0


@pytest.mark.parametrize("text", [
    "trace 00112233-4455-6677-8899-aabbccddeeff",
    "commit 13812345678a9f0c3be1d2f4e5a6b7c8d9e0f1a2",
    "sha 9f8613812345678d659a2feaa0c55ad015a3bf4f1b",
    "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "span_id=13912345678",
    "order 0207 946 0958",
    "released 2024-12-04 10:22",
    "hl_lines=\"2  7-10 23-25\"",
    "took 123 456 789 ns",
])
def test_ids_dates_and_ranges_are_not_personal_data(text: str) -> None:
    assert spans(text) == []


@pytest.mark.parametrize(("text", "value"), [
    ("Tel: 020 7946 0321", "020 7946 0321"),
    ("call (415) 555-2671 today", "(415) 555-2671"),
    ("+44 (0)20 7946 0958", "+44 (0)20 7946 0958"),
    ("台北 (02) 2345-6789", "(02) 2345-6789"),
])
def test_phone_spans_cover_the_number(text: str, value: str) -> None:
    assert ("pii.phone", value) in spans(text)


def test_iban_needs_its_country_length_and_mod_97() -> None:
    assert iban_ok("DE89370400440532013000")
    assert not iban_ok("DE89370400440532013001")  # check digits wrong
    assert not iban_ok("DE8937040044053201300")  # one short for DE
    assert not iban_ok("ZZ89370400440532013000")  # no such country
    assert spans("hex de89370400440532013000 in a log") == []  # lower case needs 'IBAN'
    assert spans("iban de89370400440532013000") == [("pii.iban", "de89370400440532013000")]


def test_names_and_addresses_mask_the_value_not_the_label() -> None:
    assert spans("Customer name: Robert Fischer") == [("pii.person_name", "Robert Fischer")]
    assert spans("收件人：李娜") == [("pii.person_name", "李娜")]
    assert spans("name: Run tests") == []
    assert ("pii.address", "Hauptstraße 12, 10115 Berlin") in spans(
        "Lieferadresse: Hauptstraße 12, 10115 Berlin")


def test_a_megabyte_of_phone_numbers_stays_linear() -> None:
    """Past ``VALIDATIONS`` candidates the rest are masked by shape: a flood of numbers that
    fail every region (the costliest case) is masked whole, in bounded time."""
    text = ("(000) 000-0000 " * 70_000)[:1_000_000]
    start = time.process_time()  # CPU time: a loaded shared machine does not fail a linear scan
    found = PHONE(text)
    assert time.process_time() - start < 4.0
    assert len(found) == 66_666 - VALIDATIONS
