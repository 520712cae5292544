"""Documents ingested off the request path: durable jobs a background worker embeds.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04

``knowledge_jobs`` holds one accepted document until its version is written: ``document`` is
the submitted request (metadata and text: user content, so it is cleared the moment the job
ends, done or failed, and the row itself is deleted after the retention window by the
worker). ``status`` moves pending -> running -> done | failed; ``attempts`` counts claims (a
job left running by a killed worker is claimed again); ``progress``/``total`` are the chunks
embedded so far; ``not_before`` is when a job whose embedder failed may be retried.
``acl_users`` mirrors the document's user ACL so an erasure can find the jobs naming a user;
``sensitivity`` and ``domain`` mirror its bounds, so a key sees only the jobs of documents it
could read.
The worker lists due jobs and deletes expired ones across tenants through definer functions
(as erasure lists its jobs); the table's RLS is therefore enabled but not forced.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DDL = """
CREATE TABLE knowledge_jobs (
    tenant_id   text NOT NULL,
    job_id      text NOT NULL,
    doc_id      text NOT NULL,
    version     text NOT NULL,
    status      text NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    attempts    integer NOT NULL DEFAULT 0,
    progress    integer NOT NULL DEFAULT 0,
    total       integer NOT NULL DEFAULT 0,
    chunks      integer,
    error       text,
    document    jsonb,
    acl_users   text[] NOT NULL DEFAULT '{}',
    sensitivity smallint NOT NULL CHECK (sensitivity BETWEEN 0 AND 3),
    domain      text,
    not_before  timestamptz NOT NULL DEFAULT now(),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, job_id),
    CHECK (status IN ('done', 'failed') OR document IS NOT NULL)
)"""
PREDICATE = "tenant_id = current_setting('app.tenant_id', true)"
OPEN_FN = "ctxgate_open_knowledge_jobs(integer)"
PURGE_FN = "ctxgate_purge_knowledge_jobs(double precision)"


def upgrade() -> None:
    bind = op.get_bind()
    # Validated as an identifier by env.py before any revision runs.
    role = str(context.config.attributes["app_role"])
    for statement in (
        DDL,
        "ALTER TABLE knowledge_jobs ENABLE ROW LEVEL SECURITY",
        # Not forced: the definer function below lists open jobs before their tenant is known.
        f"CREATE POLICY tenant_isolation ON knowledge_jobs USING ({PREDICATE}) "
        f"WITH CHECK ({PREDICATE})",
        f'GRANT SELECT, INSERT, UPDATE, DELETE ON knowledge_jobs TO "{role}"',
        "CREATE INDEX knowledge_jobs_open ON knowledge_jobs (not_before) "
        "WHERE status IN ('pending', 'running')",
        "CREATE INDEX knowledge_jobs_ended ON knowledge_jobs (updated_at) "
        "WHERE status IN ('done', 'failed')",
    ):
        bind.exec_driver_sql(statement)
    schema = str(bind.exec_driver_sql("SELECT current_schema()").scalar_one())
    bind.exec_driver_sql(f"""
CREATE FUNCTION ctxgate_open_knowledge_jobs(max_rows integer)
RETURNS TABLE (tenant_id text, job_id text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, "{schema}", pg_temp AS $$
    SELECT j.tenant_id, j.job_id FROM "{schema}".knowledge_jobs j
    WHERE j.status IN ('pending', 'running') AND j.not_before <= now()
    ORDER BY j.not_before, j.created_at LIMIT max_rows
$$""")
    # Retention runs across tenants too: only ended jobs, only past the given age.
    bind.exec_driver_sql(f"""
CREATE FUNCTION ctxgate_purge_knowledge_jobs(older_than_s double precision)
RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, "{schema}", pg_temp AS $$
    WITH gone AS (
        DELETE FROM "{schema}".knowledge_jobs j WHERE j.status IN ('done', 'failed')
        AND j.updated_at < now() - make_interval(secs => older_than_s) RETURNING 1)
    SELECT count(*)::integer FROM gone
$$""")
    for fn in (OPEN_FN, PURGE_FN):
        bind.exec_driver_sql(f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC")
        bind.exec_driver_sql(f'GRANT EXECUTE ON FUNCTION {fn} TO "{role}"')


def downgrade() -> None:
    bind = op.get_bind()
    for fn in (OPEN_FN, PURGE_FN):
        bind.exec_driver_sql(f"DROP FUNCTION IF EXISTS {fn}")
    bind.exec_driver_sql("DROP TABLE IF EXISTS knowledge_jobs")
