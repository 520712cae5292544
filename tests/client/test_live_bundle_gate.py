"""The release gate through the client, sync and async, against a live server: settings,
review, evaluation, the typed refusals, shadow and a pinned turn."""

from __future__ import annotations

import pytest
from ctxgate_client import AsyncCtxgateClient, ConflictError, ForbiddenError

from tests.client.conftest import Connect

BUNDLE = "payments/rules"


async def test_a_full_gate_release(connect: Connect, admin: AsyncCtxgateClient,
                                   keys: dict[str, str], tenant: str) -> None:
    await admin.put_tenant_settings(tenant, default_session_visibility="tree",
                                    bundle_release_gate="full")
    assert (await admin.get_tenant_settings(tenant)).bundle_release_gate == "full"
    owner, ops, rt = connect(keys["admin"]), connect(keys["ops"]), connect(keys["runtime"])
    for rev, rule in (("1", "Only change RetryConfig."), ("2", "Never touch RetryConfig.")):
        await owner.register_bundle_revision(
            bundle_id=BUNDLE, revision=rev, runtime="codex",
            files=[{"path": "AGENTS.md", "content": rule}])
    with pytest.raises(ConflictError) as refused:
        await owner.promote_bundle(BUNDLE, revision="1")
    assert refused.value.type == "bundle-not-approved"
    with pytest.raises(ForbiddenError) as own:
        await owner.approve_bundle_revision(BUNDLE, "1")
    assert own.value.type == "bundle-four-eyes"
    assert (await ops.approve_bundle_revision(BUNDLE, "1", note="ok")).decision == "approved"
    recorded = await ops.record_bundle_evaluation(
        BUNDLE, "1", suite="starter", suite_version="1", passed=True, report_sha256="0" * 64,
        metrics={"recall_at_k": 1.0})
    assert recorded.recorded_by and recorded.at
    assert (await owner.promote_bundle(BUNDLE, revision="1")).stable == "1"

    channel = await owner.shadow_bundle(BUNDLE, revision="2", agents=["eval-bot"])
    assert (channel.shadow, channel.shadow_agents) == ("2", ["eval-bot"])
    turn = await rt.assemble_context(
        user_id="u", query="retries?", budget=2000, agent_id="eval-bot",
        workspace={"bundle_id": BUNDLE, "revision": "2"})
    assert turn.manifest.bundle is not None and turn.manifest.bundle["revision"] == "2"
    assert (await owner.shadow_bundle(BUNDLE, revision=None)).shadow is None
    one = await ops.get_bundle_revision(BUNDLE, "1")
    assert one.review is not None and one.evaluations is not None
    assert [e.suite for e in one.evaluations] == ["starter"]
