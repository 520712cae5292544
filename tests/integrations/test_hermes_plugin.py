"""The Hermes plugin (clients/hermes-plugin/ctxgate) inside Hermes itself: hermes-agent's own
loader finds it in ``$HERMES_HOME/plugins``, the instance is a ``MemoryProvider`` of Hermes's
real base class with its method signatures, and Hermes's ``MemoryManager`` drives a turn
through it against the live server (prefetch before, sync after).

Opt-in: hermes-agent is not a dependency (0.19.0 pins pydantic 2.13.4 and httpx 0.28.1,
older than this venv's), so Hermes runs in a child interpreter, either

- ``CTXGATE_HERMES_PYTHON``: the Python of a venv where hermes-agent is installed and ctxgate
  installed as docs/integrations.md says (``pip install --no-deps``), exactly a user's
  setup::

    python -m venv /tmp/h/venv && /tmp/h/venv/bin/pip install hermes-agent==0.19.0 && \\
      /tmp/h/venv/bin/pip install --no-deps .
    CTXGATE_HERMES_PYTHON=/tmp/h/venv/bin/python python -m pytest \\
      tests/integrations/test_hermes_plugin.py

- or ``CTXGATE_HERMES_SRC``: an unpacked release, put first on this venv's ``sys.path``::

    pip download hermes-agent==0.19.0 --no-deps -d /tmp/h && \\
      python -m zipfile -e /tmp/h/hermes_agent-0.19.0-py3-none-any.whl /tmp/h/src
    CTXGATE_HERMES_SRC=/tmp/h/src python -m pytest tests/integrations/test_hermes_plugin.py
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from ctxgate_client import AsyncCtxgateClient

from tests.integrations.conftest import FACT, GOAL, PYTHON, World
from tests.integrations.test_hermes_provider import ANSWER, GREP_OUT, MESSAGES, QUERY

PLUGIN = Path(__file__).resolve().parents[2] / "clients" / "hermes-plugin" / "ctxgate"
PLUGIN_DESCRIPTION = ("ctxgate: guarded context (knowledge, task state, memories) before each "
                      "turn; the turn's messages and tool events into the ctxgate session "
                      "after it")  # its plugin.yaml, as `hermes memory` lists it

# What Hermes does with a provider, in its own modules (agent/agent_init.py,
# agent/turn_context.py, agent/turn_finalizer.py), printed as one JSON line.
DRIVER = """
import inspect, json, os, sys
if os.environ.get("CTXGATE_HERMES_SRC"):
    sys.path.insert(0, os.environ["CTXGATE_HERMES_SRC"])
from agent.memory_provider import MemoryProvider
from agent.memory_manager import MemoryManager, build_memory_context_block
from plugins.memory import discover_memory_providers, load_memory_provider

provider = load_memory_provider("ctxgate")
skip = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
mismatched = []
for name, base in vars(MemoryProvider).items():
    ours = getattr(type(provider), name, None)
    if name.startswith("_") or not inspect.isfunction(base) or ours is base:
        continue
    b, o = inspect.signature(base).parameters, inspect.signature(ours).parameters
    if any(k not in o or o[k].kind != p.kind for k, p in b.items() if p.kind not in skip) \\
            or any(p.default is p.empty and k not in b for k, p in o.items()
                   if p.kind not in skip) \\
            or (any(p.kind == p.VAR_KEYWORD for p in b.values())
                and not any(p.kind == p.VAR_KEYWORD for p in o.values())):
        mismatched.append(name)
manager = MemoryManager()
manager.add_provider(provider)
manager.initialize_all(session_id=os.environ["SID"], platform="cli", agent_context="primary")
text = manager.prefetch_all(os.environ["QUERY"])
turn = json.loads(os.environ["TURN"])
manager.sync_all(turn["user"], turn["assistant"], session_id=os.environ["SID"],
                 messages=turn["messages"])
drained = manager.flush_pending(timeout=30)
manager.shutdown_all()
print(json.dumps({
    "is_provider": isinstance(provider, MemoryProvider),
    "abstract": sorted(getattr(type(provider), "__abstractmethods__", ())),
    "discovered": [list(d) for d in discover_memory_providers() if d[0] == "ctxgate"],
    "mismatched": mismatched, "name": provider.name, "text": text,
    "block": build_memory_context_block(text), "drained": drained}))
"""


@pytest.fixture(scope="module")
def hermes() -> tuple[str, dict[str, str]]:
    """The interpreter to run Hermes with, and what it needs in its environment."""
    python, src = os.environ.get("CTXGATE_HERMES_PYTHON"), os.environ.get("CTXGATE_HERMES_SRC")
    if python:
        return python, {}
    if src:
        return PYTHON, {"CTXGATE_HERMES_SRC": src}
    pytest.skip("neither CTXGATE_HERMES_PYTHON nor CTXGATE_HERMES_SRC is set (module docstring)")


async def test_hermes_loads_and_drives_the_plugin(world: World,
                                                  hermes: tuple[str, dict[str, str]],
                                                  tmp_path: Path) -> None:
    home = tmp_path / "hermes-home"
    shutil.copytree(PLUGIN, home / "plugins" / "ctxgate")
    (home / "config.yaml").write_text("memory:\n  provider: ctxgate\n", encoding="utf-8")
    session = f"hermes-{uuid.uuid4()}"
    turn = {"user": QUERY, "assistant": ANSWER, "messages": MESSAGES}
    done = await asyncio.to_thread(
        # cwd outside the checkout: the installed ctxgate is the one Hermes imports
        subprocess.run, [hermes[0], "-c", DRIVER], capture_output=True, text=True,
        timeout=120, cwd=tmp_path,
        env=world.env(world.a, **hermes[1], HERMES_HOME=str(home), SID=session, QUERY=QUERY,
                      TURN=json.dumps(turn)))
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["is_provider"] and out["abstract"] == [] and out["name"] == "ctxgate"
    assert out["discovered"] == [["ctxgate", PLUGIN_DESCRIPTION, True]]
    assert out["mismatched"] == []
    assert FACT in out["text"] and GOAL in out["text"]
    assert out["block"].startswith("<memory-context>") and FACT in out["block"]
    assert out["drained"]
    async with AsyncCtxgateClient(world.url, world.a.key) as ctx:
        events = (await ctx.list_events(session, user_id=world.a.user)).events
    assert [e.type for e in events] == ["message", "message", "tool_call", "tool_result",
                                        "message"]
    assert GREP_OUT in events[3].content and events[-1].content == ANSWER
