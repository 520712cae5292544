"""Render the app's OpenAPI document as YAML: ``python -m app.openapi > openapi.yaml``.

``tests/api/test_openapi.py`` fails when the committed file differs from this output.
"""

from __future__ import annotations

import sys

import yaml

from app.main import create_app
from app.settings import Settings


def render() -> str:
    spec = create_app(Settings()).openapi()
    text: str = yaml.safe_dump(spec, sort_keys=True, allow_unicode=True, width=100)
    return text


if __name__ == "__main__":
    sys.stdout.write(render())
