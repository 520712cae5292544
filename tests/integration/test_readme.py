"""The README's "Run" section, run as a new user would paste it, on the embedded default.

The section holds two shell blocks: the first terminal's (install, ``ctxgate demo``, ``ctxgate
serve``) and the second terminal's (activate, make a key, one ``curl`` turn). They run here
verbatim in a fresh directory with no store URLs set, with one substitution said out loud: the
first block's install prefix (venv, the locked requirements, the project itself) is
checked and replaced by this test's own venv (a ``.venv/bin/activate`` that puts it on PATH),
since reinstalling the project from the network is not what is under test. The turn must then
show the demo's knowledge, task state and bundle, and Ctrl-C (SIGINT) must leave no store
process behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL_PREFIX = ("python3 -m venv .venv && . .venv/bin/activate "
                  "&& pip install -r requirements.lock && pip install --no-deps -e . && ")
PORT = 8080  # the README's curl names it


def run_blocks() -> list[str]:
    """The ```sh blocks of the README's "## Run" section, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Run", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)]


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _fake_venv(cwd: Path) -> None:
    """``.venv/bin/activate`` that puts this interpreter's scripts first on PATH."""
    bin_dir = cwd / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    scripts = Path(sys.executable).parent
    (bin_dir / "activate").write_text(f'export PATH="{scripts}:$PATH"\n')


def _store_pids(data_dir: Path) -> list[int]:
    """Processes whose command line names this test's data directory (PostgreSQL, Redis)."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True,
                         check=True).stdout
    return [int(line.split(None, 1)[0]) for line in out.splitlines()
            if str(data_dir) in line and "pytest" not in line]


def test_readme_run_section_works_as_pasted(tmp_path: Path) -> None:
    if _port_open(PORT):
        pytest.fail(f"port {PORT} is taken; the README's curl needs it free for this test")
    blocks = run_blocks()
    assert len(blocks) == 2, "the Run section holds the first and the second terminal's block"
    first, second = blocks
    assert first.startswith(INSTALL_PREFIX), "the install prefix this test substitutes changed"
    _fake_venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXGATE_")}
    env["PYTHONWARNINGS"] = "default"  # a warning must show, as it would to a user
    serve = subprocess.Popen(
        ["bash", "-c", ". .venv/bin/activate && " + first[len(INSTALL_PREFIX):]],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not _port_open(PORT):
            assert serve.poll() is None, serve.communicate()
            assert time.monotonic() < deadline, "ctxgate serve did not listen in time"
            time.sleep(0.5)
        turn = subprocess.run(["bash", "-c", second], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert turn.returncode == 0, turn.stderr
        assert "Warning" not in turn.stderr, turn.stderr
        body = json.loads(turn.stdout)
        refs = [s["ref"] for s in body["envelope"]["segments"]]
        assert any(r.startswith("kb://runbook-refund") for r in refs), refs
        assert any(r.startswith("task://task_refund_timeout") for r in refs), refs
        assert any(r.startswith("bundle://repo-payments-rules") for r in refs), refs
        assert "RetryConfig" in turn.stdout
    finally:
        os.killpg(serve.pid, signal.SIGINT)  # Ctrl-C in the first terminal
        out, err = serve.communicate(timeout=60)
    assert serve.returncode == 0, err
    assert "Warning" not in err, err
    assert "Tenants acme and globex" in out
    deadline = time.monotonic() + 20
    while (left := _store_pids(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"store processes left after Ctrl-C: {left}"
