"""Initial schema: tenant tables under Row-Level Security, the service role, key functions.

Revision ID: 0001
Revises:
Create Date: 2026-12-01

Design, in short (the adapters in app/adapters/postgres rely on every point):
- Every tenant table has ``tenant_id text not null``, ENABLE + FORCE ROW LEVEL SECURITY and
  one policy ``tenant_id = current_setting('app.tenant_id', true)`` for reads and writes. An
  unset ``app.tenant_id`` is NULL, so it matches nothing: fail closed.
- The service connects as ``app_role`` (LOGIN NOSUPERUSER NOBYPASSRLS, owns nothing) and is
  granted only the DML its adapters issue. Superusers and owners bypass RLS, hence the role.
- ``api_keys`` is reached only through SECURITY DEFINER functions (owned by the migration
  user, ``search_path`` pinned, EXECUTE revoked from PUBLIC): authentication happens before
  the tenant is known. RLS is enabled there without FORCE so the definer functions of a
  non-superuser owner still see every key; no other role has any privilege on the table.
- Knowledge chunks carry their document's permission labels (denormalized) so that search
  filters push down into one index scan. ``tsv`` is generated from ``search_text`` (see
  app/core/fts.py) with the ``simple`` configuration: language neutral, no stemming, so the
  CJK bigrams and lowercased words made in Python are the lexemes. HNSW and GIN indexes are
  partial on ``is_current``: superseded versions never enter the search graphs.
- Downgrade drops every object this revision made, and the role unless it still has
  privileges elsewhere (it is cluster-wide; another database may use it). The ``vector``
  extension stays: other objects in the database may depend on it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from alembic import context, op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EMBEDDING_DIM = 384

# FORCE applies RLS to the table owner too; api_keys is handled separately (see docstring).
TENANT_TABLES: dict[str, str] = {
    "sessions": "SELECT, INSERT, UPDATE",
    "session_events": "SELECT, INSERT",
    "task_checkpoints": "SELECT, INSERT",
    "knowledge_documents": "SELECT, INSERT, UPDATE, DELETE",
    "knowledge_chunks": "SELECT, INSERT, UPDATE, DELETE",
    "manifests": "SELECT, INSERT",
    "audit_log": "SELECT, INSERT",
}
TENANT_PREDICATE = "tenant_id = current_setting('app.tenant_id', true)"
KEY_FUNCTIONS = (
    "ctxgate_key_principal(bytea)",
    "ctxgate_key_create(text, text, text, text, smallint, text[], bytea)",
    "ctxgate_key_revoke(text)",
)

TABLES = f"""
CREATE TABLE api_keys (
    key_id         text PRIMARY KEY,
    tenant_id      text NOT NULL,
    name           text NOT NULL,
    role           text NOT NULL CHECK (role IN ('runtime', 'ops', 'admin')),
    max_data_level smallint NOT NULL CHECK (max_data_level BETWEEN 0 AND 3),
    domains        text[],
    key_hash       bytea NOT NULL UNIQUE,
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE sessions (
    tenant_id         text NOT NULL,
    session_id        text NOT NULL,
    user_id           text NOT NULL,
    agent_id          text,
    parent_session_id text,
    last_seq          integer NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id)
);

CREATE TABLE session_events (
    tenant_id  text NOT NULL,
    session_id text NOT NULL,
    seq        integer NOT NULL CHECK (seq > 0),
    type       text NOT NULL CHECK (type IN ('message', 'tool_call', 'tool_result')),
    role       text,
    content    text NOT NULL DEFAULT '',
    call_id    text,
    name       text,
    arguments  jsonb,
    is_error   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, seq),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);

-- Every revision is kept; the primary key read backwards is the latest-revision lookup.
CREATE TABLE task_checkpoints (
    tenant_id      text NOT NULL,
    task_id        text NOT NULL,
    revision       integer NOT NULL CHECK (revision > 0),
    user_id        text NOT NULL,
    session_id     text,
    parent_task_id text,
    body           jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, task_id, revision)
);

CREATE TABLE knowledge_documents (
    tenant_id   text NOT NULL,
    doc_id      text NOT NULL,
    version     integer NOT NULL,
    title       text,
    domain      text,
    sensitivity smallint NOT NULL CHECK (sensitivity BETWEEN 0 AND 3),
    trust       text NOT NULL,
    acl_all     boolean NOT NULL,
    acl_users   text[] NOT NULL DEFAULT '{{}}',
    acl_groups  text[] NOT NULL DEFAULT '{{}}',
    observed_at timestamptz,
    expires_at  timestamptz,
    source      text,
    is_current  boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, doc_id, version)
);

CREATE TABLE knowledge_chunks (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   text NOT NULL,
    doc_id      text NOT NULL,
    version     integer NOT NULL,
    chunk_no    integer NOT NULL,
    text        text NOT NULL,
    tokens      integer NOT NULL,
    embedding   vector({EMBEDDING_DIM}) NOT NULL,
    search_text text NOT NULL,
    tsv         tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, search_text)) STORED,
    domain      text,
    sensitivity smallint NOT NULL,
    trust       text NOT NULL,
    acl_all     boolean NOT NULL,
    acl_users   text[] NOT NULL,
    acl_groups  text[] NOT NULL,
    observed_at timestamptz,
    expires_at  timestamptz,
    is_current  boolean NOT NULL,
    UNIQUE (tenant_id, doc_id, version, chunk_no),
    FOREIGN KEY (tenant_id, doc_id, version) REFERENCES knowledge_documents ON DELETE CASCADE
);
-- Exact (small-tenant) search and the candidate count scan go through this btree.
CREATE INDEX knowledge_chunks_tenant_current ON knowledge_chunks (tenant_id, is_current);
CREATE INDEX knowledge_chunks_embedding ON knowledge_chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)
    WHERE is_current;
CREATE INDEX knowledge_chunks_tsv ON knowledge_chunks USING gin (tsv) WHERE is_current;

CREATE TABLE manifests (
    tenant_id      text NOT NULL,
    turn_id        text NOT NULL,
    key_id         text NOT NULL,
    session_id     text,
    task_id        text,
    user_id        text,
    request_sha256 text NOT NULL,
    body           jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, turn_id)
);
CREATE INDEX manifests_recent ON manifests (tenant_id, created_at DESC);
CREATE INDEX manifests_session ON manifests (tenant_id, session_id, created_at DESC)
    WHERE session_id IS NOT NULL;
CREATE INDEX manifests_task ON manifests (tenant_id, task_id, created_at DESC)
    WHERE task_id IS NOT NULL;

CREATE TABLE audit_log (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id text NOT NULL,
    turn_id   text,
    at        timestamptz NOT NULL DEFAULT now(),
    kind      text NOT NULL,
    principal text NOT NULL,
    ref       text,
    rule      text,
    detail    jsonb NOT NULL DEFAULT '{{}}'
);
CREATE INDEX audit_log_recent ON audit_log (tenant_id, id DESC);
CREATE INDEX audit_log_turn ON audit_log (tenant_id, turn_id, id DESC) WHERE turn_id IS NOT NULL;
"""


def _key_functions(schema: str) -> list[str]:
    # Pinned search_path plus schema-qualified names: a caller's search_path cannot redirect
    # these owner-privileged functions to look-alike objects.
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    keys = f'"{schema}".api_keys'
    return [f"""
CREATE FUNCTION ctxgate_key_principal(p_key_hash bytea)
RETURNS TABLE (key_id text, tenant_id text, role text, max_data_level smallint, domains text[])
LANGUAGE sql STABLE SECURITY DEFINER {pin} AS $$
    SELECT k.key_id, k.tenant_id, k.role, k.max_data_level, k.domains
    FROM {keys} k WHERE k.key_hash = p_key_hash AND k.revoked_at IS NULL
$$""", f"""
CREATE FUNCTION ctxgate_key_create(p_key_id text, p_tenant_id text, p_name text, p_role text,
                                   p_max_data_level smallint, p_domains text[], p_key_hash bytea)
RETURNS text LANGUAGE sql VOLATILE SECURITY DEFINER {pin} AS $$
    INSERT INTO {keys} (key_id, tenant_id, name, role, max_data_level, domains, key_hash)
    VALUES (p_key_id, p_tenant_id, p_name, p_role, p_max_data_level, p_domains, p_key_hash)
    RETURNING key_id
$$""", f"""
-- True when the key exists (revoked now or earlier, so DELETE is idempotent); false if unknown.
CREATE FUNCTION ctxgate_key_revoke(p_key_id text)
RETURNS boolean LANGUAGE sql VOLATILE SECURITY DEFINER {pin} AS $$
    WITH r AS (
        UPDATE {keys} k SET revoked_at = coalesce(k.revoked_at, now())
        WHERE k.key_id = p_key_id RETURNING 1
    )
    SELECT count(*) > 0 FROM r
$$"""]


def _role() -> str:
    role = str(context.config.attributes.get("app_role", "ctxgate_app"))
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", role):
        raise ValueError(f"invalid app role name {role!r}")
    return role


def _ensure_role(role: str) -> str:
    # Refuse rather than demote: a privileged role named as app role is a configuration error.
    return f"""
DO $$
DECLARE r pg_roles%ROWTYPE;
BEGIN
    SELECT * INTO r FROM pg_roles WHERE rolname = '{role}';
    IF NOT FOUND THEN
        CREATE ROLE "{role}" LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    ELSIF r.rolsuper OR r.rolbypassrls OR '{role}' = current_user THEN
        RAISE EXCEPTION 'app role % must be a plain role (not superuser, bypassrls or owner)',
            '{role}';
    END IF;
END $$;
"""


def _execute_all(statements: Sequence[str]) -> None:
    # One statement per call: asyncpg prepares every statement, and a prepared statement
    # cannot hold several commands. exec_driver_sql: no bind-parameter parsing of ':'.
    bind = op.get_bind()
    for statement in statements:
        if statement.strip():
            bind.exec_driver_sql(statement)


def _split(script: str) -> list[str]:
    """Split plain DDL on statement ends (only for scripts without $$ bodies)."""
    return script.split(";\n")


def upgrade() -> None:
    role = _role()
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    _execute_all(["CREATE EXTENSION IF NOT EXISTS vector", _ensure_role(role)])
    _execute_all(_split(TABLES))
    _execute_all(_key_functions(str(schema)))
    grants = [
        "ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY",
        f"CREATE POLICY tenant_isolation ON api_keys USING ({TENANT_PREDICATE})",
        f'GRANT SELECT ON alembic_version TO "{role}"',
    ]
    for fn in KEY_FUNCTIONS:
        grants += [f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC",
                   f'GRANT EXECUTE ON FUNCTION {fn} TO "{role}"']
    for table, privileges in TENANT_TABLES.items():
        grants += [
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING ({TENANT_PREDICATE}) WITH CHECK ({TENANT_PREDICATE})",
            f'GRANT {privileges} ON {table} TO "{role}"',
        ]
    _execute_all(grants)


def downgrade() -> None:
    role = _role()
    drops = [f"DROP FUNCTION IF EXISTS {fn}" for fn in KEY_FUNCTIONS]
    drops += [f"DROP TABLE IF EXISTS {t}" for t in reversed(list(TENANT_TABLES))]
    drops += ["DROP TABLE IF EXISTS api_keys", f'REVOKE ALL ON alembic_version FROM "{role}"']
    _execute_all(drops)
    # The role is cluster-wide: keep it while another database still grants it something.
    _execute_all([f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN
        DROP ROLE "{role}";
    END IF;
EXCEPTION WHEN dependent_objects_still_exist OR object_in_use THEN
    RAISE NOTICE 'role % kept: still used elsewhere', '{role}';
END $$
"""])
