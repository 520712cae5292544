"""CLI fixtures: the live server of tests/client (for the effect of a command on calls)."""

from tests.client.conftest import live_url

__all__ = ["live_url"]
