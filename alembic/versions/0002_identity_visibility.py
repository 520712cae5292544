"""Signed end-user assertions per tenant, per-key session-visibility caps, transcript search.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02

- ``tenant_identity`` holds, per tenant, whether ``user_id``/``groups`` must come from a JWT
  the tenant signs, and the key to check it with. Like ``api_keys`` it is reached only through
  SECURITY DEFINER functions: the principal lookup joins it, so authenticating a call stays
  one round trip.
- ``api_keys.max_session_visibility`` caps how far a key may read other sessions' content:
  ``self`` < ``tree`` < ``agent`` < ``all`` (all of one user's sessions, never another user's).
- ``session_events.search_text``/``tsv`` index transcripts for search (CJK as bigrams, as the
  knowledge chunks do).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from alembic import context, op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_FUNCTIONS = ("ctxgate_key_principal(bytea)",
                 "ctxgate_key_create(text, text, text, text, smallint, text[], bytea)")
NEW_FUNCTIONS = (
    "ctxgate_key_principal(bytea)",
    "ctxgate_key_create(text, text, text, text, smallint, text[], text, bytea)",
    "ctxgate_tenant_identity_set(text, boolean, text, text, text, text)",
)

DDL = [
    "ALTER TABLE api_keys ADD COLUMN max_session_visibility text NOT NULL DEFAULT 'tree' "
    "CHECK (max_session_visibility IN ('self', 'tree', 'agent', 'all'))",
    """CREATE TABLE tenant_identity (
    tenant_id         text PRIMARY KEY,
    require_assertion boolean NOT NULL DEFAULT false,
    algorithm         text NOT NULL CHECK (algorithm IN ('HS256', 'RS256')),
    key_material      text NOT NULL,
    issuer            text,
    audience          text,
    updated_at        timestamptz NOT NULL DEFAULT now()
)""",
    "ALTER TABLE tenant_identity ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE session_events ADD COLUMN search_text text NOT NULL DEFAULT ''",
    "ALTER TABLE session_events ADD COLUMN tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple', search_text)) STORED",
    "CREATE INDEX session_events_tsv ON session_events USING gin (tsv)",
    "CREATE INDEX sessions_parent ON sessions (tenant_id, parent_session_id) "
    "WHERE parent_session_id IS NOT NULL",
    "CREATE INDEX sessions_user ON sessions (tenant_id, user_id, agent_id)",
]


def _functions(schema: str) -> list[str]:
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    keys, ident = f'"{schema}".api_keys', f'"{schema}".tenant_identity'
    return [f"""
CREATE FUNCTION ctxgate_key_principal(p_key_hash bytea)
RETURNS TABLE (key_id text, tenant_id text, role text, max_data_level smallint, domains text[],
               max_session_visibility text, require_assertion boolean, algorithm text,
               key_material text, issuer text, audience text)
LANGUAGE sql STABLE SECURITY DEFINER {pin} AS $$
    SELECT k.key_id, k.tenant_id, k.role, k.max_data_level, k.domains, k.max_session_visibility,
           i.require_assertion, i.algorithm, i.key_material, i.issuer, i.audience
    FROM {keys} k LEFT JOIN {ident} i ON i.tenant_id = k.tenant_id
    WHERE k.key_hash = p_key_hash AND k.revoked_at IS NULL
$$""", f"""
CREATE FUNCTION ctxgate_key_create(p_key_id text, p_tenant_id text, p_name text, p_role text,
                                   p_max_data_level smallint, p_domains text[],
                                   p_max_session_visibility text, p_key_hash bytea)
RETURNS text LANGUAGE sql VOLATILE SECURITY DEFINER {pin} AS $$
    INSERT INTO {keys} (key_id, tenant_id, name, role, max_data_level, domains,
                        max_session_visibility, key_hash)
    VALUES (p_key_id, p_tenant_id, p_name, p_role, p_max_data_level, p_domains,
            p_max_session_visibility, p_key_hash)
    RETURNING key_id
$$""", f"""
CREATE FUNCTION ctxgate_tenant_identity_set(p_tenant_id text, p_require boolean,
                                            p_algorithm text, p_key_material text,
                                            p_issuer text, p_audience text)
RETURNS void LANGUAGE sql VOLATILE SECURITY DEFINER {pin} AS $$
    INSERT INTO {ident} (tenant_id, require_assertion, algorithm, key_material, issuer,
                         audience)
    VALUES (p_tenant_id, p_require, p_algorithm, p_key_material, p_issuer, p_audience)
    ON CONFLICT (tenant_id) DO UPDATE SET require_assertion = EXCLUDED.require_assertion,
        algorithm = EXCLUDED.algorithm, key_material = EXCLUDED.key_material,
        issuer = EXCLUDED.issuer, audience = EXCLUDED.audience, updated_at = now()
$$"""]


def _initial() -> ModuleType:
    """The 0001 module, to restore its function definitions on downgrade."""
    path = Path(__file__).with_name("0001_initial.py")
    spec = importlib.util.spec_from_file_location("ctxgate_migration_0001", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _role() -> str:
    # Validated as an identifier by env.py before any revision runs.
    return str(context.config.attributes["app_role"])


def _grants(functions: Sequence[str], role: str) -> list[str]:
    out: list[str] = []
    for fn in functions:
        out += [f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC",
                f'GRANT EXECUTE ON FUNCTION {fn} TO "{role}"']
    return out


def upgrade() -> None:
    bind = op.get_bind()
    schema = str(bind.exec_driver_sql("SELECT current_schema()").scalar_one())
    role = _role()
    statements = [f"DROP FUNCTION {fn}" for fn in OLD_FUNCTIONS] + DDL + _functions(schema)
    for s in [*statements, *_grants(NEW_FUNCTIONS, role)]:
        bind.exec_driver_sql(s)


def downgrade() -> None:
    bind = op.get_bind()
    schema = str(bind.exec_driver_sql("SELECT current_schema()").scalar_one())
    initial = _initial()
    role = _role()
    restore = [s for s in initial._key_functions(schema)
               if "ctxgate_key_revoke" not in s]
    statements = [f"DROP FUNCTION IF EXISTS {fn}" for fn in NEW_FUNCTIONS] + [
        "DROP INDEX IF EXISTS sessions_user", "DROP INDEX IF EXISTS sessions_parent",
        "ALTER TABLE session_events DROP COLUMN tsv",
        "ALTER TABLE session_events DROP COLUMN search_text",
        "DROP TABLE IF EXISTS tenant_identity",
        "ALTER TABLE api_keys DROP COLUMN max_session_visibility",
        *restore, *_grants(OLD_FUNCTIONS, role)]
    for s in statements:
        bind.exec_driver_sql(s)
