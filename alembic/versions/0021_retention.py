"""Retention: indexes for the retention job's deletes, and the least privilege it needs.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04

The retention job (``app.service.retention``, docs/retention.md) deletes, per tenant and in
short batches, manifests, audit records, idle sessions (their events cascade) and superseded
knowledge versions (their chunks cascade). It runs as the app role inside ``tenant_tx``, so
FORCE ROW LEVEL SECURITY still confines every statement to one tenant; no owner connection.

What the app role gains here, and nothing more:
- ``ctxgate_retention_tenants()``: the tenant ids (from ``api_keys``, which every tenant's
  data was written through; keys are revoked, never deleted). A definer function like the
  key functions: the app role still cannot read ``api_keys``.
- ``DELETE ON manifests``: manifests are a derived trail (refs, counts, hashes).
- ``ctxgate_prune_audit_log(older_than_days, max_rows)`` instead of ``DELETE ON audit_log``:
  audit records are evidence, so the request-path role may delete only records at least
  ``AUDIT_FLOOR_DAYS`` old, of the tenant its transaction is scoped to (RLS binds the owner
  too), ``max_rows`` at a time. A compromised worker cannot erase the trace it just made.
- ``sessions``, ``session_compactions``, ``session_bundles`` and ``knowledge_documents``
  already grant DELETE to the app role (0001, 0004, 0005): erasure and version writes use it.

Indexes serve the batch selects: ``(tenant_id, at)`` on audit_log, ``(tenant_id,
updated_at)`` on sessions (last activity), ``(tenant_id, created_at) WHERE NOT is_current``
on knowledge_documents; manifests already have ``manifests_recent (tenant_id, created_at)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AUDIT_FLOOR_DAYS = 1
INDEXES = {
    "audit_log_at": "audit_log (tenant_id, at)",
    "sessions_idle": "sessions (tenant_id, updated_at)",
    "knowledge_documents_superseded":
        "knowledge_documents (tenant_id, created_at) WHERE NOT is_current",
}
TENANTS_FN = "ctxgate_retention_tenants()"
AUDIT_FN = "ctxgate_prune_audit_log(integer, integer)"
GRANT = "GRANT DELETE ON manifests"


def upgrade() -> None:
    bind = op.get_bind()
    # Validated as an identifier by env.py before any revision runs.
    role = str(context.config.attributes["app_role"])
    schema = str(bind.exec_driver_sql("SELECT current_schema()").scalar_one())
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    for name, on in INDEXES.items():
        bind.exec_driver_sql(f"CREATE INDEX {name} ON {on}")
    bind.exec_driver_sql(f"""
CREATE FUNCTION ctxgate_retention_tenants()
RETURNS SETOF text LANGUAGE sql STABLE SECURITY DEFINER {pin} AS $$
    SELECT DISTINCT k.tenant_id FROM "{schema}".api_keys k ORDER BY 1
$$""")
    # RLS (forced) scopes the owner's DELETE to the caller's tenant_tx; with no tenant set it
    # deletes nothing.
    bind.exec_driver_sql(f"""
CREATE FUNCTION ctxgate_prune_audit_log(older_than_days integer, max_rows integer)
RETURNS integer LANGUAGE plpgsql VOLATILE SECURITY DEFINER {pin} AS $$
DECLARE n integer;
BEGIN
    IF older_than_days < {AUDIT_FLOOR_DAYS} THEN
        RAISE EXCEPTION 'audit records younger than {AUDIT_FLOOR_DAYS} day(s) are kept';
    END IF;
    WITH picked AS MATERIALIZED (
        SELECT b.id FROM "{schema}".audit_log b
        WHERE b.tenant_id = current_setting('app.tenant_id', true)
          AND b.at < now() - make_interval(days => older_than_days)
        ORDER BY b.at LIMIT max_rows FOR UPDATE SKIP LOCKED)
    DELETE FROM "{schema}".audit_log a USING picked p WHERE a.id = p.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$""")
    for fn in (TENANTS_FN, AUDIT_FN):
        bind.exec_driver_sql(f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC")
        bind.exec_driver_sql(f'GRANT EXECUTE ON FUNCTION {fn} TO "{role}"')
    bind.exec_driver_sql(f'{GRANT} TO "{role}"')


def downgrade() -> None:
    bind = op.get_bind()
    role = str(context.config.attributes["app_role"])
    bind.exec_driver_sql(f'{GRANT.replace("GRANT", "REVOKE", 1)} FROM "{role}"')
    for fn in (TENANTS_FN, AUDIT_FN):
        bind.exec_driver_sql(f"DROP FUNCTION IF EXISTS {fn}")
    for name in INDEXES:
        bind.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
