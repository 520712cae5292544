"""The /ops/ manifest explorer in a real headless Chromium (Debian's ``chromium``, driven by
Playwright's Python API through ``executable_path``: nothing is downloaded).

A real server on the test stores; two tenants, two users, a document and a session event
carrying ``<script>``/``<img onerror>`` payloads (and a session id that is one), two turns.
In the browser: sign in, find the turns (a page, More, a user), open one, see why the other
user's and the other tenant's documents were not seen (explain), diff the two, meet a
problem+json — and nothing planted ever runs or becomes an element. Screenshots go to
``tests/artifacts/explorer/`` (or ``$CTXGATE_TEST_ARTIFACTS/explorer``), ignored by git.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from app.ops_ui import CSP
from app.settings import Settings
from tests.live_server import live_server

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(os.environ.get("CTXGATE_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[1] / "artifacts")) / "explorer"
ADMIN = "browser-test-admin-" + uuid.uuid4().hex[:8]
# Each payload would set window.__xss (or open a dialog) if it ever ran.
XSS_SESSION = "s <img src=x onerror=\"window.__xss='session';alert(1)\">"
XSS_DOC_ID = "<img src=x onerror=\"window.__xss='doc-id'\">"
XSS_TEXT = ("<script>window.__xss='doc';alert(2)</script><img src=x onerror=\"alert(3)\"> "
            "The refund call times out when the payment gateway is slow.")
XSS_EVENT = ("<script>alert('event')</script><img src=x onerror=\"window.__xss='event'\"> "
             "The refund call times out in staging.")
QUERY = "why does the refund call time out?"
BOB_SESSION, BOB_TURNS = "bob-session", 55  # the explorer's page is 50 turns
BUNDLE_FILES = [{"path": "AGENTS.md", "content": "Run `make test` before every commit."},
                {"path": "services/refund/AGENTS.md",
                 "content": "<script>alert('bundle')</script> Only change RetryConfig."}]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="Debian's chromium is not installed at /usr/bin/chromium "
                                       "(apt-get install -y chromium)")


@dataclass(frozen=True)
class World:
    url: str
    ops_key: str
    turn1: str
    turn2: str
    entered: str  # a ref in turn2's envelope and not in turn1's
    bob_doc: str  # a ref of the other user's document
    other_tenant_doc: str  # a ref of the other tenant's document


def _ok(r: httpx.Response, status: int) -> Any:
    assert r.status_code == status, r.text
    return r.json() if r.content else None


def _doc(c: httpx.Client, key: str, doc_id: str, text: str, **extra: Any) -> None:
    body = {"doc_id": doc_id, "version": "v1", "text": text, "title": doc_id,
            "domain": "payments", "sensitivity": "internal", "trust": "reviewed", "acl": None,
            **extra}
    _ok(c.post("/v1/knowledge/documents", headers=_bearer(key), json=body), 201)


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _turn(c: httpx.Client, key: str, turn_id: str, query: str, **extra: Any
          ) -> dict[str, Any]:
    body = {"turn_id": turn_id, "session_id": XSS_SESSION, "user_id": "alice",
            "groups": ["payments-oncall"], "domain": "payments", "data_level": "internal",
            "query": query, "budget": {"max_tokens": 6000, "reserve_output": 1000}, **extra}
    manifest: dict[str, Any] = _ok(c.post("/v1/context", headers=_bearer(key), json=body),
                                   200)["manifest"]
    return manifest


@pytest.fixture(scope="module")
def world(pg_owner_url: str, redis_url: str) -> Iterator[World]:
    uid = uuid.uuid4().hex[:8]
    acme, globex = f"acme-{uid}", f"globex-{uid}"
    settings = Settings(database_url=pg_owner_url, redis_url=redis_url,
                        redis_prefix=f"ctxgate-browser-{uid}", admin_token=ADMIN)
    with live_server(settings) as url, httpx.Client(base_url=url, timeout=60) as c:
        def key(tenant: str, role: str) -> str:
            body = {"tenant_id": tenant, "role": role, "max_data_level": "confidential"}
            return str(_ok(c.post("/v1/admin/keys", headers=_bearer(ADMIN), json=body),
                           201)["api_key"])

        runtime, ops, admin = key(acme, "runtime"), key(acme, "ops"), key(acme, "admin")
        globex_runtime = key(globex, "runtime")
        _doc(c, runtime, "runbook-refund", "Refund calls time out when the payment gateway "
             "is slow; the refund client retries with exponential backoff.")
        _doc(c, runtime, XSS_DOC_ID, XSS_TEXT, title=XSS_TEXT[:200])
        _doc(c, runtime, "bob-refund-notes", "Bob's notes: the refund call times out because "
             "the gateway pool is exhausted.", acl={"users": ["bob"]})
        _doc(c, globex_runtime, "globex-refund", "Globex: the refund call times out at 30 s.")
        events = [{"type": "message", "role": "user", "content": XSS_EVENT},
                  {"type": "message", "role": "assistant",
                   "content": "The timeout comes from the gateway retry policy."}]
        _ok(c.post(f"/v1/sessions/{quote(XSS_SESSION, safe='')}/events", headers=_bearer(runtime),
                   json={"user_id": "alice", "events": events}), 201)
        first = _turn(c, runtime, f"turn-1-{uid}", QUERY)
        _doc(c, runtime, "retry-config", "RetryConfig caps refund retries at 3; a refund call "
             "that times out is retried with exponential backoff.")
        # the second turn has a task checkpoint and an instruction bundle: its stable section
        # (so a new prefix) and a resolved order
        checkpoint = {"user_id": "alice", "session_id": XSS_SESSION,
                      "goal": "Fix the refund timeout <script>alert('goal')</script>",
                      "next_safe_action": "Only change RetryConfig and rerun RefundIT"}
        _ok(c.put(f"/v1/tasks/task-{uid}/checkpoint", headers=_bearer(runtime),
                  json=checkpoint), 200)
        bundle = {"bundle_id": "repo-payments", "revision": "r1", "runtime": "codex",
                  "files": BUNDLE_FILES, "source": {"repo": "acme/payments", "commit": "6f2d1be"},
                  "approval": {"owner": "team-payments", "change_ticket": "ENG-1"}}
        _ok(c.post("/v1/bundles", headers=_bearer(admin), json=bundle), 201)
        _ok(c.post("/v1/bundles/repo-payments/promote", headers=_bearer(admin),
                   json={"revision": "r1"}), 200)
        second = _turn(c, runtime, f"turn-2-{uid}", "refund call time out RetryConfig retries",
                       task_id=f"task-{uid}",
                       workspace={"bundle_id": "repo-payments", "cwd": "services/refund"})
        assert second["stable_prefix_sha256"] != first["stable_prefix_sha256"]
        # newer turns of another user, more than a page: paging and the user filter's scan
        for n in range(BOB_TURNS):
            _turn(c, runtime, f"bob-{n}-{uid}", "refund gateway pool", user_id="bob",
                  session_id=BOB_SESSION)
        before = {s["ref"] for s in first["segments"]}
        entered = sorted(s["ref"] for s in second["segments"] if s["ref"] not in before)
        assert entered, "the second turn should see the document ingested between the turns"
        yield World(url=url, ops_key=ops, turn1=first["turn_id"], turn2=second["turn_id"],
                    entered=entered[0], bob_doc="kb://bob-refund-notes",
                    other_tenant_doc="kb://globex-refund")


def test_explorer_in_chromium(world: World) -> None:
    from playwright.sync_api import Dialog, sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    dialogs: list[str] = []
    page_errors: list[str] = []
    csp_violations: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})

            def dialog(d: Dialog) -> None:
                dialogs.append(d.message)
                d.dismiss()

            page.on("dialog", dialog)
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            page.on("console", lambda m: csp_violations.append(m.text)
                    if m.type == "error" and "Content Security Policy" in m.text else None)

            def shot(name: str) -> None:
                page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

            response = page.goto(f"{world.url}/ops/")
            assert response is not None and response.ok
            assert response.headers["content-security-policy"] == CSP
            assert response.headers["x-content-type-options"] == "nosniff"

            # sign in: the key goes to sessionStorage, never into the URL
            page.fill("#key", world.ops_key)
            page.click("#signin-button")
            page.wait_for_selector("#search-panel:not([hidden])")
            assert world.ops_key not in page.url
            assert page.evaluate("sessionStorage.getItem('ctxgate.ops.key')") == world.ops_key
            assert page.input_value("#key") == ""
            shot("01-signed-in")

            # find the session's turns; its id (a payload) shows as text
            page.fill("#q-session", XSS_SESSION)
            page.click("#search-button")
            page.wait_for_selector("#results:not([hidden]) tbody tr")
            results = page.locator("#results tbody tr")
            assert results.count() == 2
            assert XSS_SESSION in page.inner_text("#results")
            # a page, then More with the opaque cursor
            page.fill("#q-session", BOB_SESSION)
            page.click("#search-button")
            page.wait_for_selector("#more:not([hidden])")
            assert results.count() == 50
            page.click("#more")
            page.wait_for_selector("#more[hidden]", state="attached")
            assert results.count() == BOB_TURNS
            # the user filter reads past the other user's newer turns
            page.fill("#q-session", "")
            page.fill("#q-user", "alice")
            page.click("#search-button")
            page.wait_for_selector(f"#results tbody tr:has-text('{world.turn2}')")
            assert results.count() == 2
            assert f"{BOB_TURNS + 2} manifest(s) read" in page.inner_text("#results-note")
            shot("02-search")

            # open the first turn: segments by section, drops, waterfall, audit
            results.filter(has_text=world.turn1).locator("button.open").click()
            page.wait_for_selector("#turn:not([hidden]) tr.segment")
            assert page.inner_text("#turn-id") == world.turn1
            for section in ("stable", "session", "dynamic"):
                assert page.locator(f"#segments [data-section='{section}']").count() == 1
            assert "kb://runbook-refund" in page.inner_text("#segments")
            assert XSS_SESSION in page.inner_text("#turn-summary")
            assert page.locator("#waterfall .wf-bar").count() >= 5
            assert page.locator("#validation tbody tr").count() >= 1
            # the turn's permission counts: the other user's document, by label, no ref
            page.wait_for_selector("#audit tr.audit")
            audit = page.inner_text("#audit")
            assert "permission.withheld" in audit and "bob-refund-notes" not in audit
            assert "acl 1" in page.inner_text("#drops .withheld")
            shot("03-turn")
            # the turn, never the key, is in the URL: a reload reopens it, still signed in
            assert page.url.endswith(f"#turn={quote(world.turn1, safe='')}")
            page.reload()
            page.wait_for_selector(f"#turn:not([hidden]) #turn-id:has-text('{world.turn1}')")
            assert world.ops_key not in page.url

            # explain a ref of the envelope; why the other user's document was not seen (its
            # ACL); the other tenant's is the same 404 as a missing one, shown readably
            page.locator("#segments tr.segment:has-text('kb://runbook-refund') button.explain"
                         ).click()
            assert "included" in _explained(page, "kb://runbook-refund", ".explanation")
            for ref, expected, kind in (
                    (world.bob_doc, ("dropped at permission", "dropped.permission.acl"),
                     ".explanation"),
                    (world.other_tenant_doc, ("Not found (404)", "not-found"), ".problem")):
                page.fill("#explain-ref", ref)
                page.click("#explain-button")
                shown = _explained(page, ref, kind)
                assert all(e in shown for e in expected), shown
                shot("04-explain-" + ref.removeprefix("kb://"))

            # the second turn, by turn_id: its stable section and its bundle's resolved order
            page.fill("#q-user", "")
            page.fill("#q-turn", world.turn2)
            page.click("#search-button")
            page.wait_for_selector(f"#turn-id:has-text('{world.turn2}')")
            assert page.locator("#segments [data-section='stable'] tr.segment").count() >= 1
            order = page.inner_text("#bundle tbody")
            assert "AGENTS.md" in order and "services/refund/AGENTS.md" in order
            shot("05-turn-with-bundle")

            # diff the two turns: what entered, what left, the stable prefix
            page.fill("#diff-a", world.turn1)
            page.fill("#diff-b", world.turn2)
            page.click("#diff-button")
            page.wait_for_selector("#diff .diff-cols")
            assert world.entered in page.inner_text("#diff .changes.entered")
            assert "stable prefix CHANGED" in page.inner_text("#diff .prefix")
            assert page.locator("#diff .mark-entered").count() >= 1
            page.locator("#diff-panel").scroll_into_view_if_needed()
            shot("06-diff")

            # a problem+json, shown readably
            page.fill("#q-turn", "no-such-turn")
            page.click("#search-button")
            page.wait_for_selector("#error:not([hidden]) .problem")
            problem = page.inner_text("#error")
            assert "Not found (404)" in problem and "not-found" in problem
            assert "request_id" in problem  # to find the request's log line
            assert "no-such-turn" in problem
            shot("07-problem")

            # nothing planted ran or became an element
            assert page.evaluate("window.__xss") is None
            assert page.evaluate(
                "document.querySelectorAll('img, svg, iframe, object, embed').length") == 0
            assert page.evaluate("[...document.scripts].map(s => s.src)") == [
                f"{world.url}/ops/app.js"]
            assert dialogs == []
            assert page_errors == []
            assert csp_violations == []

            # sign out forgets the key
            page.click("#signout")
            assert page.evaluate("sessionStorage.getItem('ctxgate.ops.key')") is None
            assert page.is_visible("#signin")
        finally:
            browser.close()


def _explained(page: Any, ref: str, kind: str) -> str:
    """The explain panel's text once it shows ``kind`` (an explanation or a problem) for
    ``ref``."""
    box = page.locator("#explain")
    box.locator(f"{kind}:visible").first.wait_for()
    page.wait_for_function("r => document.getElementById('explain').textContent.includes(r)",
                           arg=ref)
    return str(box.inner_text())
