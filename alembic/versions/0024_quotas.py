"""A tenant's own quotas: request rate and burst, a key's rate, turns in flight.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04

- ``tenant_settings.quota_*``: NULL keeps the server's default (``CTXGATE_QUOTA_*``,
  docs/quotas.md); 0 turns that limit off for the tenant. Set and read, like the default
  visibility, only through the SECURITY DEFINER functions, which now carry them.
- ``ctxgate_key_principal`` returns them with the key, so the quota check on every request
  costs no database round trip of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PRINCIPAL = "ctxgate_key_principal(bytea)"
SETTINGS_GET = "ctxgate_tenant_settings_get(text)"
SETTINGS_SET_OLD = "ctxgate_tenant_settings_set(text, text)"
SETTINGS_SET = ("ctxgate_tenant_settings_set(text, text, double precision, integer, "
                "double precision, integer)")
# (column, SQL type, CHECK); the order of the functions' parameters and results.
QUOTAS = (("quota_requests_per_s", "double precision", ">= 0"),
          ("quota_requests_burst", "integer", ">= 1"),
          ("quota_key_requests_per_s", "double precision", ">= 0"),
          ("quota_turns_concurrent", "integer", ">= 0"))


def _principal(schema: str, *, quotas: bool) -> str:
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    cols = "".join(f", {name} {kind}" for name, kind, _ in QUOTAS) if quotas else ""
    sel = "".join(f", s.{name}" for name, _, _ in QUOTAS) if quotas else ""
    return f"""
CREATE FUNCTION ctxgate_key_principal(p_key_hash bytea)
RETURNS TABLE (key_id text, tenant_id text, role text, max_data_level smallint, domains text[],
               max_session_visibility text, require_assertion boolean, algorithm text,
               key_material text, issuer text, audience text,
               default_session_visibility text{cols})
LANGUAGE sql STABLE SECURITY DEFINER {pin} AS $$
    SELECT k.key_id, k.tenant_id, k.role, k.max_data_level, k.domains, k.max_session_visibility,
           i.require_assertion, i.algorithm, i.key_material, i.issuer, i.audience,
           s.default_session_visibility{sel}
    FROM "{schema}".api_keys k LEFT JOIN "{schema}".tenant_identity i
        ON i.tenant_id = k.tenant_id
    LEFT JOIN "{schema}".tenant_settings s ON s.tenant_id = k.tenant_id
    WHERE k.key_hash = p_key_hash AND k.revoked_at IS NULL
$$"""


def _settings(schema: str, *, quotas: bool) -> list[str]:
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    names = [name for name, _, _ in QUOTAS] if quotas else []
    params = "".join(f", p_{name} {kind}" for name, kind, _ in QUOTAS) if quotas else ""
    cols = "".join(f", {n}" for n in names)
    vals = "".join(f", p_{n}" for n in names)
    sets = "".join(f", {n} = EXCLUDED.{n}" for n in names)
    out_cols = "".join(f", {name} {kind}" for name, kind, _ in QUOTAS) if quotas else ""
    out_sel = "".join(f", s.{n}" for n in names)
    return [f"""
CREATE FUNCTION ctxgate_tenant_settings_set(p_tenant_id text, p_default_session_visibility text
                                            {params})
RETURNS void LANGUAGE sql VOLATILE SECURITY DEFINER {pin} AS $$
    INSERT INTO "{schema}".tenant_settings (tenant_id, default_session_visibility{cols})
    VALUES (p_tenant_id, p_default_session_visibility{vals})
    ON CONFLICT (tenant_id) DO UPDATE
        SET default_session_visibility = EXCLUDED.default_session_visibility{sets},
            updated_at = now()
$$""", f"""
CREATE FUNCTION ctxgate_tenant_settings_get(p_tenant_id text)
RETURNS TABLE (default_session_visibility text{out_cols})
LANGUAGE sql STABLE SECURITY DEFINER {pin} AS $$
    SELECT coalesce(s.default_session_visibility, 'tree'){out_sel}
    FROM (SELECT 1) AS one LEFT JOIN "{schema}".tenant_settings s
        ON s.tenant_id = p_tenant_id
$$"""]


def _grants(functions: Sequence[str], role: str) -> list[str]:
    out: list[str] = []
    for fn in functions:
        out += [f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC",
                f'GRANT EXECUTE ON FUNCTION {fn} TO "{role}"']
    return out


def _context() -> tuple[str, str]:
    schema = str(op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one())
    # Validated as an identifier by env.py before any revision runs.
    return schema, str(context.config.attributes["app_role"])


def _swap(*, quotas: bool) -> list[str]:
    schema, role = _context()
    old_set = SETTINGS_SET_OLD if quotas else SETTINGS_SET
    new_set = SETTINGS_SET if quotas else SETTINGS_SET_OLD
    return [f"DROP FUNCTION {PRINCIPAL}", f"DROP FUNCTION {old_set}",
            f"DROP FUNCTION {SETTINGS_GET}", _principal(schema, quotas=quotas),
            *_settings(schema, quotas=quotas),
            *_grants((PRINCIPAL, new_set, SETTINGS_GET), role)]


def upgrade() -> None:
    columns = [f"ALTER TABLE tenant_settings ADD COLUMN {name} {kind} CHECK ({name} {check})"
               for name, kind, check in QUOTAS]
    for statement in [*columns, *_swap(quotas=True)]:
        op.get_bind().exec_driver_sql(statement)


def downgrade() -> None:
    columns = [f"ALTER TABLE tenant_settings DROP COLUMN IF EXISTS {name}"
               for name, _, _ in QUOTAS]
    for statement in [*_swap(quotas=False), *columns]:
        op.get_bind().exec_driver_sql(statement)
