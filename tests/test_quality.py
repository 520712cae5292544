"""The code gates STYLE.md asks for, run with the suite so they cannot drift: ruff, mypy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, check=False, timeout=600)


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", "app", "tests", "alembic", "clients/python")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = _run("mypy", "app", "tests", "clients/python/ctxgate_client",
                  "clients/python/tools")
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_layers_hold() -> None:
    """The contracts in pyproject.toml's [tool.importlinter]: api → service → core, services
    through ports only, a pure core, adapters below the shell."""
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True,
                            check=False, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
