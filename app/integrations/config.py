"""What ``ctxgate mcp`` and ``ctxgate hook claude-code`` read from the environment.

| variable | meaning |
| --- | --- |
| ``CTXGATE_URL`` | the server (default ``http://127.0.0.1:8080``) |
| ``CTXGATE_API_KEY`` | a runtime key of the tenant (required) |
| ``CTXGATE_USER_ID`` | the end user every call acts for (required) |
| ``CTXGATE_USER_ASSERTION`` | the signed end-user JWT, for tenants that require one |
| ``CTXGATE_DOMAIN`` | a turn's default knowledge domain |
| ``CTXGATE_DATA_LEVEL`` | a turn's default data level (``internal`` when unset) |
| ``CTXGATE_TASK_ID`` | the task whose state the hook's turns carry and compaction commits to |
| ``CTXGATE_BUNDLE_ID`` | the instruction bundle a turn resolves (``workspace.bundle_id``) |
| ``CTXGATE_BUDGET_TOKENS`` | a turn's token budget (default: 8000 for MCP, 3000 for the hook) |
| ``CTXGATE_HOOK_TIMEOUT_S`` | the hook's deadline for all its calls (default 5 s) |

``load(env)`` reads them and raises ``ConfigError`` naming the variable at fault, so each
command can report it in its own convention before anything is sent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast, get_args

DataLevel = Literal["public", "internal", "confidential", "secret"]
DATA_LEVELS: tuple[str, ...] = get_args(DataLevel)
DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_BUDGET_TOKENS = 8000
DEFAULT_HOOK_TIMEOUT_S = 5.0


class ConfigError(ValueError):
    """A variable is missing or malformed; the message names it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDefaults:
    """What a turn uses when the caller does not say."""

    domain: str | None = None
    data_level: DataLevel = "internal"
    task_id: str | None = None
    bundle_id: str | None = None
    budget_tokens: int | None = None  # None: the integration's own default


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    url: str
    api_key: str
    user_id: str
    user_assertion: str | None
    defaults: TurnDefaults
    hook_timeout_s: float


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def data_level(value: str | None, *, name: str) -> DataLevel:
    """``value`` as a data level (``internal`` when unset)."""
    if value is None:
        return "internal"
    if value not in DATA_LEVELS:
        raise ConfigError(f"{name} must be one of {', '.join(DATA_LEVELS)}, not {value!r}")
    return cast(DataLevel, value)


def _number(env: Mapping[str, str], name: str, default: float, *, low: float, high: float
            ) -> float:
    raw = _get(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, not {raw!r}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise ConfigError(f"{name} must be between {low:.10g} and {high:.10g}, not {raw!r}")
    return value


def load(env: Mapping[str, str]) -> Config:
    """The configuration in ``env`` (``os.environ`` in the commands)."""
    user = _get(env, "CTXGATE_USER_ID")
    if user is None:
        raise ConfigError("CTXGATE_USER_ID is not set: it names the end user ctxgate acts for")
    key = _get(env, "CTXGATE_API_KEY")
    if key is None:
        raise ConfigError("CTXGATE_API_KEY is not set: it takes a runtime key of the tenant "
                          "(ctxgate keys create --tenant T --role runtime --quiet)")
    budget = _number(env, "CTXGATE_BUDGET_TOKENS", 0, low=256, high=2_000_000) \
        if _get(env, "CTXGATE_BUDGET_TOKENS") else None
    if budget is not None and budget != int(budget):
        raise ConfigError(f"CTXGATE_BUDGET_TOKENS must be a whole number, not {budget:g}")
    return Config(
        url=_get(env, "CTXGATE_URL") or DEFAULT_URL,
        api_key=key,
        user_id=user,
        user_assertion=_get(env, "CTXGATE_USER_ASSERTION"),
        defaults=TurnDefaults(
            domain=_get(env, "CTXGATE_DOMAIN"),
            data_level=data_level(_get(env, "CTXGATE_DATA_LEVEL"), name="CTXGATE_DATA_LEVEL"),
            task_id=_get(env, "CTXGATE_TASK_ID"), bundle_id=_get(env, "CTXGATE_BUNDLE_ID"),
            budget_tokens=None if budget is None else int(budget)),
        hook_timeout_s=_number(env, "CTXGATE_HOOK_TIMEOUT_S", DEFAULT_HOOK_TIMEOUT_S,
                               low=0.1, high=600))
