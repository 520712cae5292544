"""What ships is pinned: uv.lock resolves pyproject.toml as it is now, and the exported
requirements files that CI, the README and the Dockerfile install are that lock.

Regenerate after changing a dependency (uv from PyPI):

    uv lock && uv export --frozen --no-emit-project -o requirements.lock \\
      && uv export --frozen --extra dev --no-emit-project -o requirements-dev.lock
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", re.MULTILINE)


def _lock() -> dict[str, Any]:
    with (ROOT / "uv.lock").open("rb") as f:
        return tomllib.load(f)


def _declared() -> set[tuple[str, str, str, str]]:
    """pyproject's requirements as (name, extras, specifier, marker), extras' under their extra."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    reqs = [(r, None) for r in project["dependencies"]]
    reqs += [(r, extra) for extra, rs in project["optional-dependencies"].items() for r in rs]
    out: set[tuple[str, str, str, str]] = set()
    for text, extra in reqs:
        req = Requirement(text)
        marker = str(req.marker) if req.marker else ""
        if extra:
            marker = f"{marker} and extra == '{extra}'" if marker else f"extra == '{extra}'"
        out.add((canonicalize_name(req.name), ",".join(sorted(req.extras)), str(req.specifier),
                 _norm(marker)))
    return out


def _norm(marker: str) -> str:
    """A marker of ``and``-joined clauses in one spelling and order (uv sorts them)."""
    clauses = marker.replace('"', "'").split(" and ")
    return " and ".join(sorted(c.strip() for c in clauses if c.strip()))


def _locked_requires() -> set[tuple[str, str, str, str]]:
    project = next(p for p in _lock()["package"] if p["name"] == "ctxgate")
    return {(canonicalize_name(r["name"]), ",".join(sorted(r.get("extras", []))),
             str(Requirement(f"x{r.get('specifier', '')}").specifier), _norm(r.get("marker", "")))
            for r in project["metadata"]["requires-dist"]}


def test_uv_lock_resolves_pyproject_as_it_is() -> None:
    assert _declared() == _locked_requires(), "pyproject.toml changed: run `uv lock`"


@pytest.mark.parametrize("name", ["requirements.lock", "requirements-dev.lock"])
def test_exported_requirements_are_the_lock(name: str) -> None:
    versions: dict[str, set[str]] = {}  # one name may lock a version per Python/platform fork
    for p in _lock()["package"]:
        versions.setdefault(canonicalize_name(p["name"]), set()).add(p["version"])
    pins = PIN.findall((ROOT / name).read_text())
    assert pins, f"{name} pins nothing"
    wrong = {n: v for n, v in pins if v not in versions.get(canonicalize_name(n), set())}
    assert not wrong, f"{name} differs from uv.lock: {wrong} (re-export it)"
    assert "--hash=sha256:" in (ROOT / name).read_text(), "installs are hash-checked"
