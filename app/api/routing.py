"""The route class of every router: request bodies parsed by orjson.

FastAPI reads a JSON body with Starlette's ``Request.json()``, which is the stdlib parser
(2 % of a turn's CPU, py-spy). ``orjson.JSONDecodeError`` subclasses ``json.JSONDecodeError``,
so a malformed body is still FastAPI's 422 ``json_invalid``. orjson is also stricter where
strictness is right: it refuses ``NaN``/``Infinity`` literals and lone surrogates.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute


class OrjsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = orjson.loads(await self.body())
        return self._json


class OrjsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def parse_with_orjson(request: Request) -> Response:
            return await handler(OrjsonRequest(request.scope, request.receive))

        return parse_with_orjson
