"""List API keys (``ctxgate keys list``, ``GET /v1/admin/keys``) without their hashes.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04

The app role still has no privilege on ``api_keys``; ``ctxgate_key_list`` is one more
SECURITY DEFINER function beside create and revoke (pinned ``search_path``, EXECUTE only for
the app role). It returns what a listing shows and never ``key_hash``: every key of one
tenant, or of all tenants when ``p_tenant_id`` is NULL, by tenant and creation. Whoever can
call ``ctxgate_key_create`` for any tenant already can see this much.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = "ctxgate_key_list(text)"


def _create(schema: str) -> str:
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    return f"""
CREATE FUNCTION ctxgate_key_list(p_tenant_id text)
RETURNS TABLE (key_id text, tenant_id text, name text, role text, max_data_level smallint,
               domains text[], max_session_visibility text, created_at timestamptz,
               revoked_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER {pin} AS $$
    SELECT k.key_id, k.tenant_id, k.name, k.role, k.max_data_level, k.domains,
           k.max_session_visibility, k.created_at, k.revoked_at
    FROM "{schema}".api_keys k
    WHERE p_tenant_id IS NULL OR k.tenant_id = p_tenant_id
    ORDER BY k.tenant_id, k.created_at, k.key_id
$$"""


def upgrade() -> None:
    bind = op.get_bind()
    schema = str(bind.exec_driver_sql("SELECT current_schema()").scalar_one())
    # Validated as an identifier by env.py before any revision runs.
    role = str(context.config.attributes["app_role"])
    for statement in (_create(schema), f"REVOKE ALL ON FUNCTION {FUNCTION} FROM PUBLIC",
                      f'GRANT EXECUTE ON FUNCTION {FUNCTION} TO "{role}"'):
        bind.exec_driver_sql(statement)


def downgrade() -> None:
    op.get_bind().exec_driver_sql(f"DROP FUNCTION IF EXISTS {FUNCTION}")
