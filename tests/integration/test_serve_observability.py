"""``ctxgate serve`` as deployed, observed from outside: every request it answers has exactly
one JSON access line on stderr with the id its response carried (uvicorn's own lines are JSON
too), and a turn sent with a runtime ``traceparent`` reaches an OTLP/HTTP receiver in that
trace, with its store spans.

One real ``python -m app.cli serve`` process on the test session's stores; every wait is
bounded and only the process started here is signalled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.embedded import free_port
from tests.otlp_receiver import otlp_receiver

START_S = 180.0  # the first start of a process loads the embedding model
RUNTIME_TRACE = "5bd66ef5095369c7b0d1f8f4bd33716a"
TRACEPARENT = f"00-{RUNTIME_TRACE}-c532cb4098ac3dd2-01"


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def test_serve_logs_one_json_line_per_request_and_exports_the_turn_trace(
        pg_owner_url: str, redis_url: str, tmp_path: Path) -> None:
    admin = "test-admin-" + uuid.uuid4().hex
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    stderr = tmp_path / "serve.stderr"
    with otlp_receiver() as receiver:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CTXGATE_", "OTEL_"))}
        env |= {"CTXGATE_DATABASE_URL": pg_owner_url, "CTXGATE_REDIS_URL": redis_url,
                "CTXGATE_REDIS_PREFIX": f"ctxgate-serve-{uuid.uuid4().hex[:8]}",
                "CTXGATE_ADMIN_TOKEN": admin, "CTXGATE_RETENTION_ENABLED": "false",
                "CTXGATE_REEMBED_ENABLED": "false", "CTXGATE_SHUTDOWN_DELAY_S": "0",
                "CTXGATE_LOG_FORMAT": "json", "CTXGATE_LOG_LEVEL": "info",
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                "OTEL_SERVICE_NAME": "ctxgate-serve-test"}
        with stderr.open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        sent: list[httpx.Response] = []
        try:
            with httpx.Client(base_url=url, timeout=30) as c:
                deadline = time.monotonic() + START_S
                while True:
                    assert proc.poll() is None, stderr.read_text()[-4000:]
                    assert time.monotonic() < deadline, stderr.read_text()[-4000:]
                    try:
                        ready = c.get("/readyz")
                    except httpx.HTTPError:
                        time.sleep(0.2)
                        continue
                    sent.append(ready)
                    if ready.status_code == 200:
                        break
                    time.sleep(0.2)
                made = c.post("/v1/admin/keys", headers={"Authorization": f"Bearer {admin}"},
                              json={"tenant_id": f"t{uuid.uuid4().hex[:10]}",
                                    "role": "runtime", "max_data_level": "internal"})
                assert made.status_code == 201, made.text
                key = {"Authorization": f"Bearer {made.json()['api_key']}"}
                turn = c.post("/v1/context", headers={**key, "traceparent": TRACEPARENT},
                              json={"user_id": "alice", "query": "why does it time out?",
                                    "budget": {"max_tokens": 4000, "reserve_output": 500}})
                assert turn.status_code == 200, turn.text
                missing = c.get("/v1/manifests/nope", headers={**key,
                                                                "X-Request-ID": "ops-42"})
                assert missing.status_code == 404
                assert missing.json()["request_id"] == "ops-42"
                sent += [made, turn, missing]
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        lines = _lines(stderr)
        spans = list(receiver.spans)

    access = [line for line in lines if line["logger"] == "ctxgate.access"]
    for response in sent:
        rid = response.headers["x-request-id"]
        mine = [line for line in access if line["request_id"] == rid]
        assert len(mine) == 1, (rid, access)
        assert mine[0]["status"] == response.status_code
    assert len(access) == len(sent)  # and none for anything else
    (turn_line,) = [line for line in access if line["route"] == "/v1/context"]
    assert turn_line["trace_id"] == RUNTIME_TRACE and turn_line["tenant"]
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # JSON too

    trace = [s for s in spans if s.trace_id == RUNTIME_TRACE]
    names = {s.name for s in trace}
    assert {"POST /v1/context", "ctxgate.turn", "ctxgate.collect", "ctxgate.persist"} <= names
    assert any(s.attributes.get("db.system") == "postgresql" for s in trace)
    assert {s.service for s in spans} == {"ctxgate-serve-test"}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # The receiver and the server are on loopback: a proxy in the environment must not be
    # asked to reach them.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
