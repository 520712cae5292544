"""Health, readiness, metrics, and the committed openapi.yaml matching the app."""

from __future__ import annotations

from pathlib import Path

import httpx

from app.openapi import render

ROOT = Path(__file__).resolve().parents[2]


async def test_health_ready_and_metrics(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"postgres": True, "redis": True}
    metrics = await client.get("/metrics")
    assert metrics.status_code == 200
    assert "ctxgate_request_duration_seconds" in metrics.text


def test_openapi_yaml_matches_the_app() -> None:
    committed = (ROOT / "openapi.yaml").read_text()
    assert committed == render(), "regenerate: python -m app.openapi > openapi.yaml"
