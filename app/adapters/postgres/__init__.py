"""PostgreSQL adapters: one module per port, all through ``db.Database`` as the app role.

``migrate`` applies the schema (alembic, as the owner); ``db`` owns the app-role engine and
its tenant-scoped transactions; ``keys``, ``sessions``, ``tasks``, ``knowledge``,
``manifests`` and ``audit`` implement the Protocols of ``app.ports``.
"""
