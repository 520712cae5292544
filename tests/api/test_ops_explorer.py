"""The /ops/ explorer's files as served and as shipped: hardening headers on every response,
same-origin script only, no HTML sink in the script, the files in the package data (the
browser walk-through is tests/browser/test_explorer.py)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import httpx

from app.ops_ui import CSP, STATIC

ROOT = Path(__file__).resolve().parents[2]


async def test_every_file_is_served_with_the_hardening_headers(client: httpx.AsyncClient
                                                               ) -> None:
    for path, media in (("/ops/", "text/html"), ("/ops/app.js", "javascript"),
                        ("/ops/style.css", "text/css")):
        r = await client.get(path)
        assert r.status_code == 200, path
        assert media in r.headers["content-type"]
        assert r.headers["content-security-policy"] == CSP
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
    missing = await client.get("/ops/nothing-here.js")  # the app's 404, not a page
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    bare = await client.get("/ops")
    assert bare.status_code in (301, 307) and bare.headers["location"].endswith("/ops/")


def test_the_policy_allows_only_same_origin_script_and_no_inline_code() -> None:
    directives = dict(d.split(" ", 1) for d in CSP.split("; "))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert "unsafe" not in CSP
    assert directives["require-trusted-types-for"] == "'script'"


def test_the_page_has_no_inline_code_and_the_script_no_html_sink() -> None:
    html = (STATIC / "index.html").read_text()
    assert re.findall(r"<script\b[^>]*>", html) == ['<script src="app.js" defer>']
    assert not re.search(r"\son[a-z]+\s*=", html)  # no inline handlers
    assert "style=" not in html
    code = "\n".join(line for line in (STATIC / "app.js").read_text().splitlines()
                     if not line.lstrip().startswith("//"))  # the comments name the sinks
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function", "srcdoc", "javascript:", "localStorage"):
        assert sink not in code, sink  # localStorage: the key lives in sessionStorage only


def test_the_files_ship_in_the_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["app"]
    shipped = {p.relative_to(STATIC.parent.parent).as_posix() for p in STATIC.iterdir()}
    assert shipped == {"ops_ui/static/index.html", "ops_ui/static/app.js",
                       "ops_ui/static/style.css"}
    assert all(any(Path(f).match(p) for p in patterns) for f in shipped)
