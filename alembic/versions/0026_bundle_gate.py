"""The bundle release gate: who registered a revision, its reviews and evaluations, shadow
cohorts, and the tenant's choice of gate.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04

- ``bundle_revisions.registered_by``: the key that registered the revision, so a review by
  the same key can be refused (four eyes). NULL for revisions registered before this
  revision: nobody is known to have registered them, so any other admin or ops key reviews.
- ``bundle_reviews`` (approve / reject) and ``bundle_evaluations`` (a suite's result against
  a revision) are append-only for the app role: the newest review decides, every evaluation
  stays on record.
- ``bundle_channels.shadow_*``: a revision resolved beside the served one for a cohort, never
  served; in the channel row, so the turn's one state read returns it.
- ``tenant_settings.bundle_release_gate``: ``lint`` (the default: blocking lint refuses a
  promotion) or ``full`` (lint, an approval and a passing evaluation against the live
  revision). Set and read, like the other settings, through the SECURITY DEFINER functions,
  which now carry it.
All new tables are tenant tables under FORCE ROW LEVEL SECURITY, like the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES: dict[str, str] = {
    "bundle_reviews": """
CREATE TABLE bundle_reviews (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  text NOT NULL,
    bundle_id  text NOT NULL,
    revision   text NOT NULL,
    decision   text NOT NULL CHECK (decision IN ('approved', 'rejected')),
    reviewer   text NOT NULL,
    note       text,
    at         timestamptz NOT NULL DEFAULT now()
)""",
    "bundle_evaluations": """
CREATE TABLE bundle_evaluations (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id        text NOT NULL,
    bundle_id        text NOT NULL,
    revision         text NOT NULL,
    suite            text NOT NULL,
    suite_version    text NOT NULL,
    passed           boolean NOT NULL,
    metrics          jsonb NOT NULL,
    against_revision text,
    report_sha256    text NOT NULL,
    recorded_by      text NOT NULL,
    at               timestamptz NOT NULL DEFAULT now()
)""",
}
COLUMNS = [
    "ALTER TABLE bundle_revisions ADD COLUMN registered_by text",
    "ALTER TABLE bundle_channels ADD COLUMN shadow_revision text",
    "ALTER TABLE bundle_channels ADD COLUMN shadow_share double precision NOT NULL DEFAULT 0 "
    "CHECK (shadow_share >= 0 AND shadow_share <= 1)",
    "ALTER TABLE bundle_channels ADD COLUMN shadow_agents text[] NOT NULL DEFAULT '{}'",
    "ALTER TABLE tenant_settings ADD COLUMN bundle_release_gate text NOT NULL DEFAULT 'lint' "
    "CHECK (bundle_release_gate IN ('lint', 'full'))",
]
PREDICATE = "tenant_id = current_setting('app.tenant_id', true)"
SETTINGS_GET = "ctxgate_tenant_settings_get(text)"
QUOTA_PARAMS = "double precision, integer, double precision, integer"
SETTINGS_SET_OLD = f"ctxgate_tenant_settings_set(text, text, {QUOTA_PARAMS})"
SETTINGS_SET = f"ctxgate_tenant_settings_set(text, text, {QUOTA_PARAMS}, text)"
QUOTAS = ("quota_requests_per_s", "quota_requests_burst", "quota_key_requests_per_s",
          "quota_turns_concurrent")
QUOTA_TYPES = ("double precision", "integer", "double precision", "integer")


def _settings(schema: str, *, gate: bool) -> list[str]:
    """The settings functions of 0024, with (``gate``) or without the release gate."""
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    names = [*QUOTAS, *(("bundle_release_gate",) if gate else ())]
    types = [*QUOTA_TYPES, *(("text",) if gate else ())]
    params = "".join(f", p_{n} {t}" for n, t in zip(names, types, strict=True))
    cols = "".join(f", {n}" for n in names)
    vals = "".join(f", p_{n}" for n in names)
    sets = "".join(f", {n} = EXCLUDED.{n}" for n in names)
    out_cols = "".join(f", {n} {t}" for n, t in zip(names, types, strict=True))
    out_sel = "".join(f", s.{n}" for n in QUOTAS)
    gate_sel = ", coalesce(s.bundle_release_gate, 'lint')" if gate else ""
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
    SELECT coalesce(s.default_session_visibility, 'tree'){out_sel}{gate_sel}
    FROM (SELECT 1) AS one LEFT JOIN "{schema}".tenant_settings s
        ON s.tenant_id = p_tenant_id
$$"""]


def _context() -> tuple[str, str]:
    schema = str(op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one())
    # Validated as an identifier by env.py before any revision runs.
    return schema, str(context.config.attributes["app_role"])


def _swap(*, gate: bool) -> list[str]:
    schema, role = _context()
    old_set, new_set = (SETTINGS_SET_OLD, SETTINGS_SET) if gate else (SETTINGS_SET,
                                                                       SETTINGS_SET_OLD)
    grants = [s for fn in (new_set, SETTINGS_GET)
              for s in (f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC",
                        f'GRANT EXECUTE ON FUNCTION {fn} TO "{role}"')]
    return [f"DROP FUNCTION {old_set}", f"DROP FUNCTION {SETTINGS_GET}",
            *_settings(schema, gate=gate), *grants]


def upgrade() -> None:
    _, role = _context()
    statements = list(COLUMNS)
    for table, ddl in TABLES.items():
        statements += [
            ddl,
            f"CREATE INDEX {table}_revision ON {table} (tenant_id, bundle_id, revision, id)",
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY tenant_isolation ON {table} USING ({PREDICATE}) "
            f"WITH CHECK ({PREDICATE})",
            f'GRANT SELECT, INSERT ON {table} TO "{role}"']
    for statement in [*statements, *_swap(gate=True)]:
        op.get_bind().exec_driver_sql(statement)


def downgrade() -> None:
    statements = [*_swap(gate=False),
                  *(f"DROP TABLE IF EXISTS {t}" for t in reversed(list(TABLES))),
                  "ALTER TABLE tenant_settings DROP COLUMN IF EXISTS bundle_release_gate",
                  "ALTER TABLE bundle_channels DROP COLUMN IF EXISTS shadow_agents",
                  "ALTER TABLE bundle_channels DROP COLUMN IF EXISTS shadow_share",
                  "ALTER TABLE bundle_channels DROP COLUMN IF EXISTS shadow_revision",
                  "ALTER TABLE bundle_revisions DROP COLUMN IF EXISTS registered_by"]
    for statement in statements:
        op.get_bind().exec_driver_sql(statement)
