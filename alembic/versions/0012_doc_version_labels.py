"""Knowledge versions are the client's labels; the server orders them by ingest (issue 16, item 1).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04

``knowledge_documents.version`` and ``knowledge_chunks.version`` become ``text`` (``v3``,
``6f2d1be``, ``2026.07.15.3``; an existing integer version becomes its digits), and
``knowledge_documents.revision`` is the server's own order of a document's versions: 1 for the
first version ingested, one more for each new version. A re-ingest of a known version keeps its
revision (it is rewritten in place, as before), and the current version is the one with the
highest revision. Existing versions get their revisions in integer order, so what was current
stays current.

Downgrade turns versions back into integers: each version becomes its revision (labels are
lost; the order, and so the current version, is kept).

The tables keep their RLS policies and grants. FORCE ROW LEVEL SECURITY binds the owner too,
and the migration's updates must see every tenant's rows, so it is lifted for the updates and
restored in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("knowledge_documents", "knowledge_chunks")
FK = "knowledge_chunks_doc_fkey"
ADD_FK = (f"ALTER TABLE knowledge_chunks ADD CONSTRAINT {FK} FOREIGN KEY "
          "(tenant_id, doc_id, version) REFERENCES knowledge_documents ON DELETE CASCADE")
# 0001 left the constraint to PostgreSQL's naming; find it by what it references.
DROP_FK = """
DO $$
DECLARE c text;
BEGIN
    SELECT conname INTO STRICT c FROM pg_constraint
    WHERE conrelid = 'knowledge_chunks'::regclass AND contype = 'f'
      AND confrelid = 'knowledge_documents'::regclass;
    EXECUTE 'ALTER TABLE knowledge_chunks DROP CONSTRAINT ' || quote_ident(c);
END $$
"""


def _run(statements: Sequence[str]) -> None:
    bind = op.get_bind()
    for table in TABLES:
        bind.exec_driver_sql(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    for statement in statements:
        bind.exec_driver_sql(statement)
    for table in TABLES:
        bind.exec_driver_sql(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


def upgrade() -> None:
    _run((
        DROP_FK,
        "ALTER TABLE knowledge_documents ADD COLUMN revision integer",
        """UPDATE knowledge_documents d SET revision = o.revision
           FROM (SELECT tenant_id, doc_id, version, row_number() OVER (
                     PARTITION BY tenant_id, doc_id ORDER BY version) AS revision
                 FROM knowledge_documents) o
           WHERE (d.tenant_id, d.doc_id, d.version) = (o.tenant_id, o.doc_id, o.version)""",
        "ALTER TABLE knowledge_documents ALTER COLUMN revision SET NOT NULL",
        "ALTER TABLE knowledge_documents ADD CONSTRAINT knowledge_documents_revision "
        "UNIQUE (tenant_id, doc_id, revision)",
        "ALTER TABLE knowledge_documents ALTER COLUMN version TYPE text USING version::text",
        "ALTER TABLE knowledge_chunks ALTER COLUMN version TYPE text USING version::text",
        ADD_FK,
    ))


def downgrade() -> None:
    _run((
        f"ALTER TABLE knowledge_chunks DROP CONSTRAINT {FK}",
        # Through U+0001 + revision, which no label can be (labels hold no control
        # characters): a swap ("10" -> 2 while "2" -> 1) would collide with a unique key
        # halfway through one statement.
        """UPDATE knowledge_chunks c SET version = chr(1) || d.revision FROM knowledge_documents d
           WHERE (c.tenant_id, c.doc_id, c.version) = (d.tenant_id, d.doc_id, d.version)""",
        "UPDATE knowledge_documents SET version = chr(1) || revision",
        "UPDATE knowledge_chunks SET version = substr(version, 2)",
        "UPDATE knowledge_documents SET version = substr(version, 2)",
        "ALTER TABLE knowledge_documents ALTER COLUMN version TYPE integer USING version::integer",
        "ALTER TABLE knowledge_chunks ALTER COLUMN version TYPE integer USING version::integer",
        "ALTER TABLE knowledge_documents DROP COLUMN revision",
        ADD_FK,
    ))
