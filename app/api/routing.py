"""The route class of every router: request bodies parsed by orjson.

FastAPI reads a JSON body with Starlette's ``Request.json()``, which is the stdlib parser
(2 % of a turn's CPU, py-spy). ``orjson.JSONDecodeError`` subclasses ``json.JSONDecodeError``,
so a malformed body is still FastAPI's 400 ``malformed-json``. orjson is also stricter where
strictness is right: it refuses ``NaN``/``Infinity`` literals and lone surrogates. A UTF-8 BOM
is skipped, as the stdlib parser did.

Limits no schema can express, checked once on the parsed body (``check_body``), each a 422
``invalid-request`` naming the place (``loc``) and never echoing the value: nesting deeper than
``MAX_JSON_DEPTH`` (a tool call's arguments at depth 1,000 used to exhaust the serializer), an
integer outside the signed 64-bit range (PostgreSQL's jsonb codec and every JSON client past
2^53 lose it; a 25-digit id belongs in a string), and U+0000 in any string or key (PostgreSQL
text and jsonb cannot hold it).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import re
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

# orjson reads an integer past 64 bits (and one below -2^63) as a float, silently changing
# it; a body with a 19-digit or longer integer (rare) takes the stdlib parser, which keeps it,
# so ``check_body`` can refuse it. The digits of a fraction or an exponent's mantissa
# (0.00012345678901234567) are no integer.
_LONG_INTEGER = re.compile(rb"(?<![\d.])\d{19,}(?![\d.eE])")
MAX_JSON_DEPTH = 64
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
Path = tuple[str | int, ...]


def _refuse(loc: Path, type_: str, msg: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body", *loc), "type": type_, "msg": msg}])


def check_body(doc: Any) -> None:
    """Raise a 422 ``RequestValidationError`` for the first place in ``doc`` past a limit
    (see the module docstring). Iterative: the depth it refuses is also the depth it can walk.
    A container's scalar members are checked where they stand, not pushed with a path of
    their own: a 384-float ``query_embedding`` cost 150 us a turn, most of it building paths."""
    stack: list[tuple[Any, Path]] = [(doc, ())]
    while stack:
        node, loc = stack.pop()
        if len(loc) > MAX_JSON_DEPTH:
            raise _refuse(loc[:MAX_JSON_DEPTH], "json_too_deep",
                          f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(node, dict):
            members: Iterable[tuple[str | int, Any]] = node.items()
        elif isinstance(node, list):
            members = enumerate(node)
        else:  # the document itself, or a scalar pushed from the depth limit
            if (error := _scalar_error(node)) is not None:
                raise _refuse(loc, *error)
            continue
        deep = len(loc) >= MAX_JSON_DEPTH  # members are pushed, to be refused as too deep
        for at, value in members:
            if type(at) is str and "\x00" in at:
                raise _refuse(loc, "string_nul", "a key contains U+0000")
            kind = type(value)  # JSON's own types: no subclasses to allow for
            if deep or kind is dict or kind is list:
                stack.append((value, (*loc, at)))
            elif kind is not float and (error := _scalar_error(value)) is not None:
                raise _refuse((*loc, at), *error)


def _scalar_error(value: Any) -> tuple[str, str] | None:
    """The (type, message) of a scalar past a limit: U+0000 in a string, an integer outside
    64 bits."""
    if isinstance(value, str):
        return ("string_nul", "a string contains U+0000") if "\x00" in value else None
    if isinstance(value, int) and not isinstance(value, bool) \
            and not INT_MIN <= value <= INT_MAX:
        return ("int_out_of_range",
                "an integer outside the signed 64-bit range (send it as a string)")
    return None


def _no_constants(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


class OrjsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            body = body.removeprefix(codecs.BOM_UTF8)  # the stdlib parser accepted one
            try:
                doc = (json.loads(body, parse_constant=_no_constants)
                       if _LONG_INTEGER.search(body) else orjson.loads(body))
            except RecursionError as exc:  # the stdlib parser's own depth limit
                raise _refuse((), "json_too_deep",
                              f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from exc
            check_body(doc)
            self._json = doc
        return self._json


def _query_names(dependant: Dependant) -> frozenset[str]:
    """The query parameters a route declares, its dependencies' included."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return frozenset(names)


class OrjsonRoute(APIRoute):
    """Bodies parsed by orjson and checked by ``check_body``; query parameters the route does
    not declare are refused (422 ``extra_forbidden``), as unknown body fields are: a typo'd
    ``limt=5`` must not silently mean the default."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        declared = _query_names(self.dependant)

        async def parse_with_orjson(request: Request) -> Response:
            unknown = sorted(set(request.query_params) - declared)
            if unknown:
                raise RequestValidationError([
                    {"loc": ("query", name), "type": "extra_forbidden",
                     "msg": "this operation has no such query parameter"}
                    for name in unknown])
            ours = OrjsonRequest(request.scope, request.receive)
            if await ours.body():
                # Parsed here, outside FastAPI's body handling, which would turn a limit's
                # 422 into a bare 400; a body that is not JSON is left to FastAPI's 400.
                with contextlib.suppress(ValueError):
                    await ours.json()
            return await handler(ours)

        return parse_with_orjson
