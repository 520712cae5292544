"""Instruction bundles: immutable revisions, release channels, a hash denylist, session pins.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02

- ``bundle_revisions`` are immutable once written (the app role may only INSERT them and set
  ``revoked_at``); ``sha256`` is the hash of the bundle's files, computed by the service.
- ``bundle_channels`` say which revision new sessions get: ``stable``, or ``canary`` for a
  cohort (a share of sessions and/or named agents).
- ``bundle_denylist`` holds revoked hashes, so the same content cannot come back under a new
  revision name.
- ``session_bundles`` pin a session to the revision it was admitted with.
All are tenant tables under FORCE ROW LEVEL SECURITY, like the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES: dict[str, tuple[str, str]] = {
    "bundle_revisions": ("SELECT, INSERT, UPDATE (revoked_at, revoke_reason)", """
CREATE TABLE bundle_revisions (
    tenant_id      text NOT NULL,
    bundle_id      text NOT NULL,
    revision       text NOT NULL,
    runtime        text NOT NULL,
    sha256         text NOT NULL,
    body           jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz,
    revoke_reason  text,
    PRIMARY KEY (tenant_id, bundle_id, revision)
)"""),
    "bundle_channels": ("SELECT, INSERT, UPDATE", """
CREATE TABLE bundle_channels (
    tenant_id       text NOT NULL,
    bundle_id       text NOT NULL,
    stable_revision text,
    canary_revision text,
    canary_share    double precision NOT NULL DEFAULT 0
                    CHECK (canary_share >= 0 AND canary_share <= 1),
    canary_agents   text[] NOT NULL DEFAULT '{}',
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, bundle_id)
)"""),
    "bundle_denylist": ("SELECT, INSERT", """
CREATE TABLE bundle_denylist (
    tenant_id text NOT NULL,
    sha256    text NOT NULL,
    reason    text NOT NULL,
    at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, sha256)
)"""),
    "session_bundles": ("SELECT, INSERT, UPDATE", """
CREATE TABLE session_bundles (
    tenant_id  text NOT NULL,
    session_id text NOT NULL,
    bundle_id  text NOT NULL,
    revision   text NOT NULL,
    sha256     text NOT NULL,
    bound_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, bundle_id)
)"""),
}
PREDICATE = "tenant_id = current_setting('app.tenant_id', true)"


def _role() -> str:
    # Validated as an identifier by env.py before any revision runs.
    return str(context.config.attributes["app_role"])


def upgrade() -> None:
    bind = op.get_bind()
    role = _role()
    for table, (privileges, ddl) in TABLES.items():
        for statement in (
            ddl,
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY tenant_isolation ON {table} USING ({PREDICATE}) "
            f"WITH CHECK ({PREDICATE})",
            f'GRANT {privileges} ON {table} TO "{role}"',
        ):
            bind.exec_driver_sql(statement)


def downgrade() -> None:
    bind = op.get_bind()
    for table in reversed(list(TABLES)):
        bind.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
