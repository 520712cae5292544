"""Request bodies parsed by orjson keep the stdlib parser's answers where those were right;
no route hops to a worker thread."""

from __future__ import annotations

import inspect
import json

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from app.api.routes import ROUTERS
from app.api.routing import _LONG_INTEGER, OrjsonRequest, check_body


async def parse(body: bytes) -> object:
    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": body, "more_body": False}

    return await OrjsonRequest({"type": "http", "method": "POST", "headers": []},
                               receive).json()


async def test_64_bit_integers_stay_exact_and_a_bom_is_skipped() -> None:
    assert await parse(b'{"n": 9223372036854775807}') == {"n": 2**63 - 1}
    assert await parse(b'{"n": 12, "s": "\\u00e9"}') == {"n": 12, "s": "é"}
    assert await parse(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}


def _nested(depth: int) -> bytes:
    return b'{"a": ' * depth + b"1" + b"}" * depth


@pytest.mark.parametrize(("body", "type_", "loc"), [
    (b'{"args": {"id": 1180591620717411303424}}', "int_out_of_range", ["body", "args", "id"]),
    (b'{"n": -9223372036854775809}', "int_out_of_range", ["body", "n"]),
    (_nested(65), "json_too_deep", ["body", *["a"] * 64]),
    (_nested(1000), "json_too_deep", ["body", *["a"] * 64]),
    (b'[' * 900 + b'1180591620717411303424' + b']' * 900, "json_too_deep",
     ["body", *[0] * 64]),
    (b'{"tags": ["ok", "a\\u0000b"]}', "string_nul", ["body", "tags", 1]),
    (b'{"a\\u0000": 1}', "string_nul", ["body"]),
    # members checked in place (a vector's floats skipped): the place still named exactly
    (b'{"v": [0.5, 0.25, 1.0, 1180591620717411303424]}', "int_out_of_range", ["body", "v", 3]),
    (b'{"m": [[0.5, "x"], [1.5, "y\\u0000"]]}', "string_nul", ["body", "m", 1, 1]),
    (b'"root\\u0000"', "string_nul", ["body"]),
])
async def test_limits_no_schema_expresses_are_422_with_the_place(
        body: bytes, type_: str, loc: list[object]) -> None:
    with pytest.raises(RequestValidationError) as caught:
        await parse(body)
    [error] = caught.value.errors()
    assert (error["type"], list(error["loc"])) == (type_, loc)
    assert "u0000" not in str(error) and "1180591620717411303424" not in str(error)


def test_a_body_at_the_depth_limit_passes() -> None:
    check_body(json.loads(_nested(64)))


@pytest.mark.parametrize("body", [b'{"n": NaN}', b'{"n": 1180591620717411303424, "x": NaN}',
                                  b'{"a": '])
async def test_not_json_is_a_decode_error_on_both_paths(body: bytes) -> None:
    with pytest.raises(json.JSONDecodeError):
        await parse(body)


def test_only_integer_literals_take_the_exact_path() -> None:
    assert _LONG_INTEGER.search(b'{"n": 1180591620717411303424}')
    for fraction in (b"[0.00012345678901234567]", b"[1.2345678901234567890e-5]", b"[12345]"):
        assert _LONG_INTEGER.search(fraction) is None


def test_no_route_runs_a_dependency_or_handler_in_a_worker_thread() -> None:
    """FastAPI runs a plain-function dependency or endpoint in its threadpool: a thread hop per
    request that cost ~2.5 % of a worker's CPU when the container lookup was one."""
    def sync_calls(d: Dependant) -> list[str]:
        own = [] if d.call is None or inspect.iscoroutinefunction(d.call) else [repr(d.call)]
        return own + [name for sub in d.dependencies for name in sync_calls(sub)]

    routes = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]
    assert len(routes) > 20
    assert {r.path: sync_calls(r.dependant) for r in routes if sync_calls(r.dependant)} == {}
