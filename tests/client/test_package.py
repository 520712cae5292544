"""The client's package: the sync client is generated from the async one and current, both
have the same methods, one per endpoint of the API, and the wheel stands alone."""

from __future__ import annotations

import inspect
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from ctxgate_client import AsyncCtxgateClient, CtxgateClient

from app.main import create_app
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_sync_client_is_generated_from_the_async_one() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "clients/python/tools/unasync.py"),
                             "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_both_clients_have_the_same_methods_and_signatures() -> None:
    def methods(cls: type) -> dict[str, str]:
        return {name: str(inspect.signature(fn)) for name, fn in vars(cls).items()
                if callable(fn) and not name.startswith("_")}

    sync, async_ = methods(CtxgateClient), methods(AsyncCtxgateClient)
    assert set(sync) - {"close"} == set(async_) - {"aclose"}
    assert all(inspect.iscoroutinefunction(getattr(AsyncCtxgateClient, n)) for n in async_)
    assert {n: s for n, s in sync.items() if n != "close"} == {
        n: s for n, s in async_.items() if n != "aclose"}


def test_the_wheel_of_clients_python_alone_is_self_contained(tmp_path: Path) -> None:
    source = tmp_path / "src"  # a copy: the build leaves build/ and *.egg-info behind
    shutil.copytree(ROOT / "clients/python", source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(tmp_path), str(source)],
                           capture_output=True, text=True, check=False, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("ctxgate_client-*.whl")
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith("/METADATA"))
        requires = [line.split(":", 1)[1].split(">")[0].strip()
                    for line in z.read(meta).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
        assert sorted(requires) == ["httpx", "pydantic"]
        assert "ctxgate_client/py.typed" in z.namelist()
        z.extractall(tmp_path / "site")
    # imported from the unpacked wheel alone, ahead of the editable install: it needs nothing
    # of the server
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import ctxgate_client; "
             "assert ctxgate_client.__file__.startswith(sys.argv[1]); "
             "assert not any(m == 'app' or m.startswith('app.') for m in sys.modules)")
    ran = subprocess.run([sys.executable, "-I", "-c", probe, str(tmp_path / "site")],
                         capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr


def test_every_endpoint_of_the_api_has_a_method() -> None:
    """Each operation in the app's OpenAPI document is one ``Call`` of the client."""
    source = (ROOT / "clients/python/ctxgate_client/_async_client.py").read_text()
    called = {(m, p) for m, p in re.findall(r'method="(\w+)", path=(?:path\()?"([^"]+)"',
                                             source)}
    app = create_app(Settings())
    served = {(method.upper(), re.sub(r"\{[^}]+\}", "{}", route))
              for route, ops in app.openapi()["paths"].items() for method in ops}
    assert served - called == set()
    assert called - served == set()
