"""Request bodies parsed by orjson keep the stdlib parser's answers where those were right."""

from __future__ import annotations

import json

import pytest

from app.api.routing import _LONG_INTEGER, OrjsonRequest


async def parse(body: bytes) -> object:
    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": body, "more_body": False}

    return await OrjsonRequest({"type": "http", "method": "POST", "headers": []},
                               receive).json()


async def test_integers_past_64_bits_stay_exact_and_a_bom_is_skipped() -> None:
    assert await parse(b'{"n": 1180591620717411303424}') == {"n": 2**70}
    assert await parse(b'{"n": 12, "s": "\\u00e9"}') == {"n": 12, "s": "é"}
    assert await parse(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}


@pytest.mark.parametrize("body", [b'{"n": NaN}', b'{"n": 1180591620717411303424, "x": NaN}',
                                  b'{"a": '])
async def test_not_json_is_a_decode_error_on_both_paths(body: bytes) -> None:
    with pytest.raises(json.JSONDecodeError):
        await parse(body)


def test_only_integer_literals_take_the_exact_path() -> None:
    assert _LONG_INTEGER.search(b'{"n": 1180591620717411303424}')
    for fraction in (b"[0.00012345678901234567]", b"[1.2345678901234567890e-5]", b"[12345]"):
        assert _LONG_INTEGER.search(fraction) is None
