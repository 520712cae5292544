"""POST /v1/context ``workspace.files``: Claude Code path-scoped rules load when the runtime
names a matching file in play, on the real stores."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn

API_RULE = '---\npaths:\n  - "services/api/**/*.ts"\n---\nValidate every handler input.\n'


async def _setup(client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> str:
    admin, runtime = await make_key(tenant, "admin"), await make_key(tenant)
    body = {"bundle_id": "web-rules", "revision": "1", "runtime": "claude-code",
            "files": [{"path": "CLAUDE.md", "content": "Use pnpm."},
                      {"path": ".claude/rules/api.md", "content": API_RULE}]}
    r = await client.post("/v1/bundles", headers=bearer(admin), json=body)
    assert r.status_code == 201, r.text
    r = await client.post("/v1/bundles/web-rules/promote", headers=bearer(admin),
                          json={"revision": "1"})
    assert r.status_code == 200, r.text
    return runtime


async def _order(client: httpx.AsyncClient, key: str, workspace: dict[str, Any]) -> list[str]:
    r = await client.post("/v1/context", headers=bearer(key),
                          json=turn(workspace={"bundle_id": "web-rules", **workspace}))
    assert r.status_code == 200, r.text
    return [f["path"] for f in r.json()["manifest"]["bundle"]["resolved_order"]]


async def test_path_scoped_rule_loads_only_for_matching_files_in_play(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await _setup(client, make_key, tenant)
    assert await _order(client, key, {}) == ["CLAUDE.md"]
    assert await _order(client, key, {"files": ["README.md"]}) == ["CLAUDE.md"]
    assert await _order(client, key, {"files": ["services/api/users/get.ts"]}) == [
        "CLAUDE.md", ".claude/rules/api.md"]


async def test_files_in_play_are_validated(client: httpx.AsyncClient, make_key: KeyMaker,
                                           tenant: str) -> None:
    key = await _setup(client, make_key, tenant)
    for files in (["a\x00b"], ["x"] * 257, "services/api/a.ts"):
        r = await client.post("/v1/context", headers=bearer(key), json=turn(
            workspace={"bundle_id": "web-rules", "files": files}))
        assert r.status_code == 422, (files, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
