"""Cross-session recall by meaning, English stemming for transcripts, a tenant's default visibility.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

- ``session_events.embedding``/``embedder``: a vector per searchable event, filled in the
  background after the append is acknowledged (appends never wait on a model); ``embedder``
  names the model that made it (``app.service.recall``). NULL is "not embedded yet": the
  partial index ``session_events_unembedded`` is the embedding queue. There is no ANN index:
  a search is bounded to one user's visible sessions (at most 1,000), where an exact scan
  over their events is both correct and small, and an HNSW index filtered that narrowly would
  return too few rows. The app role gets UPDATE on these two columns only: the archive stays
  append-only.
- ``session_events.tsv_en``: the normalized text under the ``english`` configuration, as
  0015 gave knowledge chunks ("research" matches "researching"; stop words never match).
- ``tenant_settings.default_session_visibility``: how far a turn that names no visibility
  reads the user's other sessions. ``tree`` unless the tenant widens it (the seeds' fail-closed
  default); the key's cap still bounds it. Reached, like ``tenant_identity``, only through
  SECURITY DEFINER functions: the principal lookup joins it, so authentication stays one
  round trip.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EMBEDDING_DIM = 384
PRINCIPAL = "ctxgate_key_principal(bytea)"
SETTINGS_SET = "ctxgate_tenant_settings_set(text, text)"
SETTINGS_GET = "ctxgate_tenant_settings_get(text)"

DDL = [
    f"ALTER TABLE session_events ADD COLUMN embedding vector({EMBEDDING_DIM})",
    "ALTER TABLE session_events ADD COLUMN embedder text",
    "CREATE INDEX session_events_unembedded ON session_events (tenant_id, session_id, seq) "
    "WHERE embedding IS NULL AND search_text <> ''",
    "ALTER TABLE session_events ADD COLUMN tsv_en tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, search_text)) STORED",
    "CREATE INDEX session_events_tsv_en ON session_events USING gin (tsv_en)",
    """CREATE TABLE tenant_settings (
    tenant_id                  text PRIMARY KEY,
    default_session_visibility text NOT NULL DEFAULT 'tree'
        CHECK (default_session_visibility IN ('self', 'tree', 'agent', 'all')),
    updated_at                 timestamptz NOT NULL DEFAULT now()
)""",
    "ALTER TABLE tenant_settings ENABLE ROW LEVEL SECURITY",
]


def _principal(schema: str, *, with_settings: bool) -> str:
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    extra_col = ", default_session_visibility text" if with_settings else ""
    extra_sel = ", s.default_session_visibility" if with_settings else ""
    extra_join = (f' LEFT JOIN "{schema}".tenant_settings s ON s.tenant_id = k.tenant_id'
                  if with_settings else "")
    return f"""
CREATE FUNCTION ctxgate_key_principal(p_key_hash bytea)
RETURNS TABLE (key_id text, tenant_id text, role text, max_data_level smallint, domains text[],
               max_session_visibility text, require_assertion boolean, algorithm text,
               key_material text, issuer text, audience text{extra_col})
LANGUAGE sql STABLE SECURITY DEFINER {pin} AS $$
    SELECT k.key_id, k.tenant_id, k.role, k.max_data_level, k.domains, k.max_session_visibility,
           i.require_assertion, i.algorithm, i.key_material, i.issuer, i.audience{extra_sel}
    FROM "{schema}".api_keys k LEFT JOIN "{schema}".tenant_identity i
        ON i.tenant_id = k.tenant_id{extra_join}
    WHERE k.key_hash = p_key_hash AND k.revoked_at IS NULL
$$"""


def _settings_functions(schema: str) -> list[str]:
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    return [f"""
CREATE FUNCTION ctxgate_tenant_settings_set(p_tenant_id text, p_default_session_visibility text)
RETURNS void LANGUAGE sql VOLATILE SECURITY DEFINER {pin} AS $$
    INSERT INTO "{schema}".tenant_settings (tenant_id, default_session_visibility)
    VALUES (p_tenant_id, p_default_session_visibility)
    ON CONFLICT (tenant_id) DO UPDATE
        SET default_session_visibility = EXCLUDED.default_session_visibility,
            updated_at = now()
$$""", f"""
CREATE FUNCTION ctxgate_tenant_settings_get(p_tenant_id text)
RETURNS TABLE (default_session_visibility text)
LANGUAGE sql STABLE SECURITY DEFINER {pin} AS $$
    SELECT coalesce(
        (SELECT s.default_session_visibility FROM "{schema}".tenant_settings s
         WHERE s.tenant_id = p_tenant_id), 'tree')
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


def upgrade() -> None:
    schema, role = _context()
    # The archive stays append-only for the app role: it may fill in a vector, nothing else.
    statements = [*DDL, f'GRANT UPDATE (embedding, embedder) ON session_events TO "{role}"',
                  f"DROP FUNCTION {PRINCIPAL}", _principal(schema, with_settings=True),
                  *_settings_functions(schema),
                  *_grants((PRINCIPAL, SETTINGS_SET, SETTINGS_GET), role)]
    for statement in statements:
        op.get_bind().exec_driver_sql(statement)


def downgrade() -> None:
    schema, role = _context()
    statements = [f"DROP FUNCTION IF EXISTS {SETTINGS_SET}",
                  f"DROP FUNCTION IF EXISTS {SETTINGS_GET}",
                  f"DROP FUNCTION {PRINCIPAL}", _principal(schema, with_settings=False),
                  *_grants((PRINCIPAL,), role),
                  "DROP TABLE IF EXISTS tenant_settings",
                  f'REVOKE UPDATE (embedding, embedder) ON session_events FROM "{role}"',
                  "ALTER TABLE session_events DROP COLUMN IF EXISTS tsv_en",
                  "DROP INDEX IF EXISTS session_events_unembedded",
                  "ALTER TABLE session_events DROP COLUMN IF EXISTS embedder",
                  "ALTER TABLE session_events DROP COLUMN IF EXISTS embedding"]
    for statement in statements:
        op.get_bind().exec_driver_sql(statement)
