"""Leakage canaries: operator-planted strings the service looks for in every turn's envelope.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05

- ``leakage_canaries`` is operator data, not tenant data: one row per planted string, with the
  tenant (and optionally the user) it was planted for. Every worker must read the whole
  registry to check any tenant's turn, which no tenant-scoped RLS session may do, so the table
  is handled like ``api_keys``: reached only through SECURITY DEFINER functions (owner
  privileges, ``search_path`` pinned, EXECUTE revoked from PUBLIC, granted to the app role);
  RLS enabled without FORCE and no privilege for any other role, so a tenant session can
  never select a canary, not even its own tenant's.
- ``leakage_canaries_revision`` is a sequence bumped by every create and delete; workers poll
  ``ctxgate_canary_revision()`` (one tiny read) and reload the list only when it moved.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = """
CREATE TABLE leakage_canaries (
    canary_id  text PRIMARY KEY,
    tenant_id  text NOT NULL,
    user_id    text,
    label      text NOT NULL,
    text       text NOT NULL CHECK (char_length(text) BETWEEN 8 AND 256),
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)"""
FUNCTIONS = (
    "ctxgate_canary_create(text, text, text, text, text, text)",
    "ctxgate_canary_list(text)",
    "ctxgate_canary_delete(text)",
    "ctxgate_canary_revision()",
)


def _functions(schema: str) -> list[str]:
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    table = f'"{schema}".leakage_canaries'
    seq = f'"{schema}".leakage_canaries_revision'
    return [f"""
CREATE FUNCTION ctxgate_canary_create(p_canary_id text, p_tenant_id text, p_user_id text,
                                      p_label text, p_text text, p_created_by text)
RETURNS timestamptz LANGUAGE sql VOLATILE SECURITY DEFINER {pin} AS $$
    SELECT nextval('{seq}');
    INSERT INTO {table} (canary_id, tenant_id, user_id, label, text, created_by)
    VALUES (p_canary_id, p_tenant_id, p_user_id, p_label, p_text, p_created_by)
    RETURNING created_at
$$""", f"""
-- Every canary (of p_tenant_id when not NULL), texts included: only the platform operator's
-- routes and the workers' registry call this.
CREATE FUNCTION ctxgate_canary_list(p_tenant_id text)
RETURNS TABLE (canary_id text, tenant_id text, user_id text, label text, text text,
               created_by text, created_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER {pin} AS $$
    SELECT c.canary_id, c.tenant_id, c.user_id, c.label, c.text, c.created_by, c.created_at
    FROM {table} c WHERE p_tenant_id IS NULL OR c.tenant_id = p_tenant_id
    ORDER BY c.canary_id
$$""", f"""
CREATE FUNCTION ctxgate_canary_delete(p_canary_id text)
RETURNS boolean LANGUAGE sql VOLATILE SECURITY DEFINER {pin} AS $$
    WITH d AS (DELETE FROM {table} c WHERE c.canary_id = p_canary_id RETURNING 1),
         bump AS (SELECT nextval('{seq}') FROM d)
    SELECT (SELECT count(*) FROM bump) > 0
$$""", f"""
CREATE FUNCTION ctxgate_canary_revision()
RETURNS bigint LANGUAGE sql STABLE SECURITY DEFINER {pin} AS $$
    SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {seq}
$$"""]


def upgrade() -> None:
    bind = op.get_bind()
    schema = str(bind.exec_driver_sql("SELECT current_schema()").scalar_one())
    # Validated as an identifier by env.py before any revision runs.
    role = str(context.config.attributes["app_role"])
    statements = [TABLE, "CREATE SEQUENCE leakage_canaries_revision",
                  "ALTER TABLE leakage_canaries ENABLE ROW LEVEL SECURITY",
                  *_functions(schema)]
    for fn in FUNCTIONS:
        statements += [f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC",
                       f'GRANT EXECUTE ON FUNCTION {fn} TO "{role}"']
    for statement in statements:
        bind.exec_driver_sql(statement)


def downgrade() -> None:
    for statement in [*(f"DROP FUNCTION IF EXISTS {fn}" for fn in FUNCTIONS),
                      "DROP SEQUENCE IF EXISTS leakage_canaries_revision",
                      "DROP TABLE IF EXISTS leakage_canaries"]:
        op.get_bind().exec_driver_sql(statement)
