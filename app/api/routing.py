"""The route class of every router: request bodies parsed by orjson.

FastAPI reads a JSON body with Starlette's ``Request.json()``, which is the stdlib parser
(2 % of a turn's CPU, py-spy). ``orjson.JSONDecodeError`` subclasses ``json.JSONDecodeError``,
so a malformed body is still FastAPI's 400 ``malformed-json``. orjson is also stricter where
strictness is right: it refuses ``NaN``/``Infinity`` literals and lone surrogates. Two of its
differences are undone: a UTF-8 BOM is skipped, and integers past 64 bits stay exact.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

# orjson reads an integer past 64 bits as a float, which would change a tool call's
# arguments; a body with such an integer (rare) takes the stdlib parser, which keeps it. The
# digits of a fraction or an exponent's mantissa (0.00012345678901234567) are no integer.
_LONG_INTEGER = re.compile(rb"(?<![\d.])\d{20,}(?![\d.eE])")


def _no_constants(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


class OrjsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            body = body.removeprefix(codecs.BOM_UTF8)  # the stdlib parser accepted one
            self._json = (json.loads(body, parse_constant=_no_constants)
                          if _LONG_INTEGER.search(body) else orjson.loads(body))
        return self._json


class OrjsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def parse_with_orjson(request: Request) -> Response:
            return await handler(OrjsonRequest(request.scope, request.receive))

        return parse_with_orjson
