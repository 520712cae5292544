"""Long-term memory records with history, and durable "forget me" erasure jobs.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

- ``memories`` holds the current row of each memory record (shaped like the seeds' record:
  statement, origin, evidence_ref, scope, confidence, sensitivity, observed_at, expires_at,
  status, supersedes); ``memory_history`` keeps every version and decision.
- ``erasures`` are durable jobs: a restart resumes them (``ctxgate_open_erasures()`` lists
  open jobs across tenants for the worker), and the receipt lives on the row.
- Erasure needs to delete and to tombstone, so the service role gains DELETE on the layers a
  user's data lives in and UPDATE on manifests and audit (identity replaced, shape kept).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES: dict[str, tuple[str, str]] = {
    "memories": ("SELECT, INSERT, UPDATE, DELETE", """
CREATE TABLE memories (
    tenant_id      text NOT NULL,
    memory_id      text NOT NULL,
    version        integer NOT NULL DEFAULT 1,
    statement      text NOT NULL,
    norm_sha256    text NOT NULL,
    subject_key    text,
    origin         text NOT NULL,
    evidence_ref   text,
    scope_level    text NOT NULL CHECK (scope_level IN ('user', 'team')),
    user_id        text,
    domain         text,
    owner          text NOT NULL,
    source_session text NOT NULL,
    task_id        text,
    confidence     real NOT NULL DEFAULT 0.5 CHECK (confidence >= 0 AND confidence <= 1),
    sensitivity    smallint NOT NULL CHECK (sensitivity BETWEEN 0 AND 3),
    status         text NOT NULL CHECK (status IN
                   ('active', 'pending', 'superseded', 'rejected', 'hypothesis')),
    supersedes     text,
    pinned         boolean NOT NULL DEFAULT false,
    observed_at    timestamptz NOT NULL DEFAULT now(),
    confirmed_at   timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz,
    embedding      vector(384),
    search_text    text NOT NULL DEFAULT '',
    tsv            tsvector GENERATED ALWAYS AS (to_tsvector('simple', search_text)) STORED,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, memory_id),
    CHECK (scope_level = 'team' OR user_id IS NOT NULL)
)"""),
    "memory_history": ("SELECT, INSERT, DELETE", """
CREATE TABLE memory_history (
    tenant_id  text NOT NULL,
    memory_id  text NOT NULL,
    version    integer NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    action     text NOT NULL,
    actor      text NOT NULL,
    snapshot   jsonb NOT NULL,
    PRIMARY KEY (tenant_id, memory_id, version, action)
)"""),
    "erasures": ("SELECT, INSERT, UPDATE", """
CREATE TABLE erasures (
    tenant_id    text NOT NULL,
    erasure_id   text NOT NULL,
    user_id      text NOT NULL,
    status       text NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    requested_by text NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz,
    attempts     integer NOT NULL DEFAULT 0,
    receipt      jsonb,
    PRIMARY KEY (tenant_id, erasure_id)
)"""),
}
INDEXES = [
    "CREATE INDEX memories_user ON memories (tenant_id, scope_level, user_id, status)",
    "CREATE INDEX memories_key ON memories (tenant_id, subject_key) WHERE subject_key IS NOT NULL",
    "CREATE INDEX memories_norm ON memories (tenant_id, norm_sha256)",
    "CREATE INDEX memories_tsv ON memories USING gin (tsv)",
    "CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops)",
    "CREATE INDEX erasures_open ON erasures (status) WHERE status IN ('pending', 'running')",
]
# Erasure deletes a user's rows and tombstones their identity where the record must stay.
EXTRA_GRANTS = [
    "GRANT DELETE ON sessions, session_events, task_checkpoints, session_bundles",
    "GRANT UPDATE (user_id, body) ON manifests",
    "GRANT UPDATE (principal, detail) ON audit_log",
]
OPEN_FN = "ctxgate_open_erasures()"
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
    for statement in INDEXES:
        bind.exec_driver_sql(statement)
    for grant in EXTRA_GRANTS:
        bind.exec_driver_sql(f'{grant} TO "{role}"')
    schema = str(bind.exec_driver_sql("SELECT current_schema()").scalar_one())
    # The erasure worker must find open jobs before it knows their tenant (as key lookup
    # must find keys): a definer function lists them, so the owner may not be forced.
    bind.exec_driver_sql("ALTER TABLE erasures NO FORCE ROW LEVEL SECURITY")
    bind.exec_driver_sql(f"""
CREATE FUNCTION ctxgate_open_erasures()
RETURNS TABLE (tenant_id text, erasure_id text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, "{schema}", pg_temp AS $$
    SELECT e.tenant_id, e.erasure_id FROM "{schema}".erasures e
    WHERE e.status IN ('pending', 'running') ORDER BY e.requested_at
$$""")
    bind.exec_driver_sql(f"REVOKE ALL ON FUNCTION {OPEN_FN} FROM PUBLIC")
    bind.exec_driver_sql(f'GRANT EXECUTE ON FUNCTION {OPEN_FN} TO "{role}"')


def downgrade() -> None:
    bind = op.get_bind()
    role = _role()
    bind.exec_driver_sql(f"DROP FUNCTION IF EXISTS {OPEN_FN}")
    for grant in EXTRA_GRANTS:
        bind.exec_driver_sql(f'{grant.replace("GRANT", "REVOKE", 1)} FROM "{role}"')
    for table in reversed(list(TABLES)):
        bind.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
