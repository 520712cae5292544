"""Memory purpose and tenant-wide team memory.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04

``purpose`` (``support`` | ``analysis`` | ``execution``; NULL: every purpose) is what a memory
was written for; recall with a purpose sees that purpose and NULL, recall without one sees
NULL only. ``tenant_wide`` marks a team memory without a domain as served in every domain;
an unmarked one is served only to turns without a domain. Team memories without a domain
written before this revision were served everywhere, so they are marked tenant-wide here and
keep doing so.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for statement in (
        "ALTER TABLE memories ADD COLUMN purpose text "
        "CHECK (purpose IN ('support', 'analysis', 'execution'))",
        "ALTER TABLE memories ADD COLUMN tenant_wide boolean NOT NULL DEFAULT false",
        "ALTER TABLE memories ADD CONSTRAINT memories_tenant_wide_team CHECK "
        "(NOT tenant_wide OR (scope_level = 'team' AND domain IS NULL))",
        "UPDATE memories SET tenant_wide = true WHERE scope_level = 'team' AND domain IS NULL",
    ):
        op.execute(statement)


def downgrade() -> None:
    op.execute("ALTER TABLE memories DROP CONSTRAINT memories_tenant_wide_team")
    op.execute("ALTER TABLE memories DROP COLUMN tenant_wide")
    op.execute("ALTER TABLE memories DROP COLUMN purpose")
