"""RateLimit response headers, as draft-ietf-httpapi-ratelimit-headers-10 defines them.

A request counted against a tenant's bucket answers with the policy and what is left::

    RateLimit-Policy: "tenant_rate";q=400;w=2
    RateLimit: "tenant_rate";r=399;t=1

``q`` is the bucket's depth (the burst), ``w`` the seconds an empty bucket takes to fill,
``r`` the requests left now, ``t`` the seconds until the bucket is full again — or, on a 429,
until a retry may succeed (``Retry-After`` says the same). A refused turn slot names its
policy with ``qu="concurrent-requests"`` and no window. Values are Structured Fields (RFC
9651): the policy name a string, numbers integers.
"""

from __future__ import annotations

import math

from app.core.quotas import QuotaDecision

STATE = "ratelimit"  # where a request's decision waits for its response (scope["state"])


def headers(decision: QuotaDecision) -> dict[str, str]:
    name = decision.limit.value
    policy = f'"{name}";q={decision.quota}'
    if decision.window_s is None:
        policy += ';qu="concurrent-requests"'
    else:
        policy += f";w={max(1, math.ceil(decision.window_s))}"
    wait = decision.reset_s if decision.allowed else decision.retry_after_s
    return {"RateLimit-Policy": policy,
            "RateLimit": f'"{name}";r={decision.remaining};t={math.ceil(wait)}'}
