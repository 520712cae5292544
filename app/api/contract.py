"""What the OpenAPI document says beyond what FastAPI infers: the contract the server keeps.

``complete(spec)`` takes FastAPI's generated document and returns it with:

- errors as ``application/problem+json`` (RFC 9457; the only media type ``app.api.errors``
  sends for a 4xx/5xx), not ``application/json``;
- the ``bearer`` security scheme, required by every operation but the probes and metrics;
- the statuses every such operation can answer whatever its own code does: 401 (no or bad
  key), 429 ``quota-exceeded`` with ``Retry-After`` and the RateLimit headers, 503
  ``dependency-unavailable`` with ``Retry-After`` (a store down or out of connections:
  ``app.adapters.faults``); with a JSON body also 400 ``malformed-json``, 413 (``BodyLimit``)
  and 422; with path parameters 404;
- ``/metrics`` as Prometheus text.

Generated here, once, so ``/openapi.json`` and the committed ``openapi.yaml`` are the same
document and a fuzzer checking responses against it (``tests/fuzz``) checks the real server.
"""

from __future__ import annotations

import copy
from typing import Any

PROBLEM = "application/problem+json"
UNAUTHENTICATED = frozenset({"/healthz", "/readyz", "/metrics"})
_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying",
                                "schema": {"type": "integer", "minimum": 1}}}
_METHODS = ("get", "put", "post", "delete", "patch")


def _problem(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description,
                           "content": {PROBLEM: {"schema": _PROBLEM_REF}}}
    if headers:
        out["headers"] = headers
    return out


_RATE_LIMIT = {**_RETRY_AFTER,
               "RateLimit-Policy": {"description": "the quota policy that refused the "
                                    "request (docs/quotas.md)", "schema": {"type": "string"}},
               "RateLimit": {"description": "what is left of it and when it resets",
                             "schema": {"type": "string"}}}
COMMON = {
    "401": _problem("missing, unknown or revoked key"),
    "429": _problem("quota-exceeded: the tenant's or key's request rate, or the tenant's "
                    "turns in flight, is at its quota (docs/quotas.md); nothing was done: "
                    "retry after Retry-After", _RATE_LIMIT),
    "503": _problem("a dependency (postgres, redis, the embedder or the summarizer) is "
                    "unavailable or out of connections; the body names it. Nothing was "
                    "written: retry after Retry-After", _RETRY_AFTER),
}
WITH_BODY = {
    "400": _problem("the body is not JSON"),
    "413": _problem("the body is larger than the server's limit"),
    "422": _problem("the body does not match the schema, or is past a parse limit (depth, "
                    "integer range, U+0000); errors[] names each place"),
}
WITH_PATH = {"404": _problem("no such resource in the caller's tenant (another tenant's is "
                             "the same 404)")}


def _errors_as_problems(responses: dict[str, Any]) -> None:
    for status, response in responses.items():
        content = response.get("content")
        if status[0] in "45" and content and "application/json" in content:
            content[PROBLEM] = content.pop("application/json")


def complete(spec: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    out.setdefault("components", {}).setdefault("securitySchemes", {})["bearer"] = {
        "type": "http", "scheme": "bearer",
        "description": "a tenant key (cgk_...), or the platform admin token for /v1/admin"}
    for path, item in out.get("paths", {}).items():
        for method in _METHODS:
            op = item.get(method)
            if op is None:
                continue
            responses = op.setdefault("responses", {})
            _errors_as_problems(responses)
            if path in UNAUTHENTICATED:
                continue
            op["security"] = [{"bearer": []}]
            extra = {**COMMON, **(WITH_BODY if "requestBody" in op else {}),
                     **(WITH_PATH if "{" in path else {})}
            for status, response in extra.items():
                responses.setdefault(status, copy.deepcopy(response))
    metrics = out.get("paths", {}).get("/metrics", {}).get("get")
    if metrics is not None:
        metrics["responses"]["200"]["content"] = {
            "text/plain": {"schema": {"type": "string"}}}
    return out
