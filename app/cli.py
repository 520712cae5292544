"""The ``ctxgate`` command: serve, demo, migrate, keys, bench and the runtime integrations.

With no database URL (``CTXGATE_APP_DATABASE_URL``, ``CTXGATE_DATABASE_URL``) and no
``CTXGATE_REDIS_URL`` set, ``serve`` and ``demo`` run on the embedded default (PostgreSQL with
pgvector and a Redis-compatible server under ``CTXGATE_DATA_DIR``), started here and stopped
on exit; with both set they start nothing.

Migrations run as the owner (``CTXGATE_DATABASE_URL``); everything else connects as the app
role. ``ctxgate migrate`` always migrates; the other commands only when asked
(``CTXGATE_MIGRATE_ON_START``, ``serve --migrate``) or on the embedded stores, whose database
this process owns (so a fresh machine's ``ctxgate demo`` or ``ctxgate serve`` just works). A
deployment migrates once, apart from its serving replicas (docs/deploy.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import signal
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from pydantic import SecretStr

from app.core.model import DataLevel, Role
from app.embedded import DataDirInUse, EmbeddedPostgres, EmbeddedStores
from app.settings import Settings

log = logging.getLogger("ctxgate")


def _admin_token(settings: Settings) -> Settings:
    """In embedded mode without a configured token, keep one in the data directory."""
    if settings.admin_token is not None:
        return settings
    path = settings.data_dir / "admin_token"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return settings.model_copy(update={"admin_token": SecretStr(path.read_text().strip())})


@contextlib.contextmanager
def stores(settings: Settings, *, redis: bool = True) -> Iterator[Settings]:
    """Yield settings with live store URLs, starting the embedded default when needed. The
    embedded database is this process's own: it migrates on start unless
    ``CTXGATE_MIGRATE_ON_START`` is false."""
    have_db = settings.database_url is not None or settings.app_database_url is not None
    have_redis = settings.redis_url is not None
    if have_db and (have_redis or not redis):
        yield settings
        return
    if have_db != have_redis and redis:
        sys.exit("set a database URL (CTXGATE_APP_DATABASE_URL or CTXGATE_DATABASE_URL) and "
                 "CTXGATE_REDIS_URL, or neither (for the embedded default)")
    owned = {"migrate_on_start": settings.migrate_on_start is not False}
    if not redis:
        pg = EmbeddedPostgres(settings.data_dir.resolve() / "pg")
        url = pg.start()
        try:
            yield settings.model_copy(update={"database_url": url, **owned})
        finally:
            pg.stop()
        return
    embedded = EmbeddedStores(settings.data_dir)
    try:
        urls = embedded.start()
    except DataDirInUse as exc:  # another serve, demo or retention run on this directory
        sys.exit(f"ctxgate: {exc}")
    try:
        yield _admin_token(settings.model_copy(update={
            "database_url": urls.database_url, "redis_url": urls.redis_url, **owned}))
    finally:
        embedded.stop()


def migrate(settings: Settings) -> str | None:
    """Migrate as the owner; the revision found before (None: a fresh database)."""
    from app.adapters.postgres.migrate import upgrade

    if settings.database_url is None:
        sys.exit("migrating needs the owner's CTXGATE_DATABASE_URL; the app role's "
                 "(CTXGATE_APP_DATABASE_URL) may not change the schema")
    password = settings.app_db_password.get_secret_value() if settings.app_db_password else None
    return upgrade(settings.database_url, app_role=settings.app_db_role, app_password=password)


def migrate_if_asked(settings: Settings) -> None:
    if settings.migrate_on_start:
        migrate(settings)


def serving(settings: Settings) -> Settings:
    """``settings`` as the server keeps them: the app role's URL and not the owner's, checked
    to reach a migrated schema as an unprivileged role."""
    from app.adapters.postgres.db import service_url
    from app.adapters.postgres.migrate import NotServable, check_serving

    url = service_url(settings)
    try:
        check_serving(url, pgbouncer=settings.database_pgbouncer)
    except NotServable as exc:
        sys.exit(f"ctxgate serve: {exc}")
    return settings.model_copy(update={"app_database_url": url, "database_url": None})


# Longer than a client's idle-connection expiry (httpx: 5 s, uvicorn's default here too): with
# equal timeouts the server closed connections the client was just reusing, and that request
# failed with a reset (seen once in 1,000 open-loop requests). Agents idle between turns.
KEEP_ALIVE_S = 75


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def cmd_serve(args: argparse.Namespace) -> None:
    import uvicorn

    from app.main import create_app
    from app.serving import serve

    # SIGTERM ends the process cleanly wherever it comes: while starting, it unwinds through
    # stores(), which stops what it started; while serving, uvicorn takes it and drains
    # (app/serving.py), then raises it again on its way out, and it lands here. Python's
    # default there killed the process and left the embedded stores running.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    asked = Settings()
    if args.migrate:
        asked = asked.model_copy(update={"migrate_on_start": True})
    with stores(asked) as owned:
        migrate_if_asked(owned)
        settings = serving(owned)
        if owned.database_url and settings.admin_token and \
                os.environ.get("CTXGATE_ADMIN_TOKEN") is None:
            print(f"admin token: {settings.data_dir / 'admin_token'}", file=sys.stderr)
        if args.workers == 1:
            serve(create_app(settings), delay_s=settings.shutdown_delay_s, host=args.host,
                  port=args.port, timeout_keep_alive=KEEP_ALIVE_S,
                  timeout_graceful_shutdown=settings.drain_timeout_s, **_logging(settings))
            return
        # Worker processes build their own app from the environment: hand them the store
        # URLs and admin token this process resolved (the embedded stores stay ours), and a
        # directory where each worker's metrics live so that any of them can serve the sum.
        # Each worker's E5 inference runs OpenMP threads that spin while they wait for work;
        # two workers inferring at once then spin against each other on the same cores
        # (measured, 2 workers on 2 cores, c=4 with server-made embeddings: 33.6 rps, p99
        # 449 ms; with passive waiting 48.6 rps, p99 155 ms). An explicit setting wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        metrics_dir = Path(os.environ.setdefault(
            "PROMETHEUS_MULTIPROC_DIR", str(settings.data_dir.resolve() / "prometheus")))
        metrics_dir.mkdir(parents=True, exist_ok=True)
        for stale in metrics_dir.glob("*.db"):  # a previous run's counts are not this run's
            stale.unlink()
        os.environ.pop("CTXGATE_DATABASE_URL", None)  # workers never hold the owner's URL
        for name, value in (("CTXGATE_APP_DATABASE_URL", settings.app_database_url),
                            ("CTXGATE_REDIS_URL", settings.redis_url),
                            ("CTXGATE_ADMIN_TOKEN", settings.admin_token.get_secret_value()
                             if settings.admin_token else None)):
            if value is not None:
                os.environ[name] = value
        # Each worker drains its own requests on the SIGTERM uvicorn's supervisor sends it.
        uvicorn.run("app.main:create_app", factory=True, workers=args.workers, host=args.host,
                    port=args.port, timeout_keep_alive=KEEP_ALIVE_S,
                    timeout_graceful_shutdown=settings.drain_timeout_s, **_logging(settings))


def _logging(settings: Settings) -> dict[str, Any]:
    """uvicorn's logging options: ours in every worker (app.logs), its access log off (the
    app writes one access line per request, with its request id)."""
    from app.logs import logging_config

    return {"log_config": logging_config(settings.log_level, settings.log_format),
            "log_level": settings.log_level, "access_log": False}


def cmd_migrate(_: argparse.Namespace) -> None:
    from app.adapters.postgres.migrate import head

    with stores(Settings(), redis=False) as settings:
        before = migrate(settings)
    print(f"schema already at {head()}" if before == head()
          else f"migrations applied: {before or 'empty database'} -> {head()}")


def cmd_keys_create(args: argparse.Namespace) -> None:
    from app.commands.keys import key_service
    from app.ports import NewKey

    async def run(settings: Settings) -> tuple[str, str]:
        async with key_service(settings) as keys:
            return await keys.create(NewKey(
                tenant_id=args.tenant, role=Role(args.role),
                max_data_level=DataLevel.parse(args.max_data_level),
                domains=tuple(args.domain) if args.domain else None, name=args.name))

    with stores(Settings(), redis=False) as settings:
        migrate_if_asked(settings)
        key_id, api_key = asyncio.run(run(settings))
    # --quiet prints the secret alone, so a shell can capture it: KEY=$(ctxgate keys create ...)
    print(api_key if args.quiet else f"key_id  {key_id}\napi_key {api_key}")


def cmd_keys_list(args: argparse.Namespace) -> None:
    from app.commands.keys import key_service, render_json, render_table
    from app.ports import KeyInfo

    async def run(settings: Settings) -> list[KeyInfo]:
        async with key_service(settings) as keys:
            return await keys.list_keys(args.tenant)

    with stores(Settings(), redis=False) as settings:
        migrate_if_asked(settings)
        found = asyncio.run(run(settings))
    if found or args.json:
        print((render_json if args.json else render_table)(found))
    else:
        print("no keys" + (f" for tenant {args.tenant!r}" if args.tenant else ""),
              file=sys.stderr)


def cmd_keys_revoke(args: argparse.Namespace) -> None:
    from app.commands.keys import key_service
    from app.core.errors import NotFound

    async def run(settings: Settings) -> None:
        async with key_service(settings) as keys:
            await keys.revoke(args.key_id)

    with stores(Settings(), redis=False) as settings:
        migrate_if_asked(settings)
        try:
            asyncio.run(run(settings))
        except NotFound:
            sys.exit(f"ctxgate keys revoke: no key {args.key_id!r} (see ctxgate keys list)")
    print(f"revoked {args.key_id}: its next call is refused (401)")


def cmd_retention_run(args: argparse.Namespace) -> None:
    from app.commands.retention import render, retention_service
    from app.service.retention import RetentionReport

    async def run(settings: Settings) -> RetentionReport:
        async with retention_service(settings) as service:
            return await service.run(dry_run=args.dry_run, tenant_ids=args.tenant or None)

    with stores(Settings()) as settings:
        migrate_if_asked(settings)
        report = asyncio.run(run(settings))
    print(render(report, as_json=args.json))
    if report.failed_tenants:
        sys.exit(1)


def cmd_demo(_: argparse.Namespace) -> None:
    from app.demo import run_demo

    with stores(Settings()) as settings:
        migrate_if_asked(settings)
        asyncio.run(run_demo(settings))


def cmd_mcp(_: argparse.Namespace) -> None:
    from app.integrations.mcp_server import run_stdio

    sys.exit(run_stdio(os.environ))


def cmd_hook_claude_code(_: argparse.Namespace) -> None:
    from app.integrations.claude_code_hook import main as hook

    sys.exit(hook())


def cmd_bundles_push(args: argparse.Namespace) -> None:
    from app.integrations.bundles_push import PushOptions, push

    sys.exit(push(PushOptions(
        path=args.path, bundle_id=args.bundle_id, runtime=args.runtime, revision=args.revision,
        promote=args.promote, canary_share=args.canary_share,
        canary_agents=tuple(args.canary_agent or ()), allow_dirty=args.allow_dirty),
        os.environ))


def cmd_bench(argv: list[str]) -> None:
    import bench

    bench.main(argv)


DESCRIPTION = """\
ctxgate: the context-assembly gateway for AI agents.

With neither CTXGATE_DATABASE_URL nor CTXGATE_REDIS_URL set, the commands that need stores
run on the embedded default under CTXGATE_DATA_DIR (./.ctxgate): a PostgreSQL with pgvector
and a Redis-compatible server, started on demand and stopped on exit."""

EPILOG = """\
examples:
  ctxgate demo && ctxgate serve          the guided tour, then the API on 127.0.0.1:8080
  KEY=$(ctxgate keys create --tenant acme --role runtime --quiet)
  ctxgate bundles push . --bundle-id web --runtime claude-code --promote
  ctxgate bench --scale smoke            a one-minute benchmark"""


def _share(value: str) -> float:
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1, not {value!r}")
    return share


def bundles_push_parser(bundles: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from app.core.bundles import RUNTIMES

    push = bundles.add_parser(
        "push", help="register a git checkout's instruction files as a bundle revision",
        description="Reads the instruction files RUNTIME loads (AGENTS.md, CLAUDE.md, "
        ".claude/rules, SOUL.md, .hermes.md, ...) as committed at HEAD in the git work tree "
        "holding PATH (tracked files only), and registers them as a revision of the bundle "
        "with the repository and commit as its source; prints the server's lint findings. "
        "Content the bundle already holds registers nothing. A client of the server at "
        "CTXGATE_URL (default http://127.0.0.1:8080) with an admin key of the tenant in "
        "CTXGATE_API_KEY. Exit codes: 0 done, 1 the server refused or is unreachable, 2 bad "
        "input (nothing sent).")
    push.add_argument("path", type=Path, metavar="PATH",
                      help="a directory inside the git work tree (its whole repository is read)")
    push.add_argument("--bundle-id", required=True, metavar="ID",
                      help="the bundle to add the revision to (workspace.bundle_id of a turn)")
    push.add_argument("--runtime", required=True, choices=RUNTIMES,
                      help="the agent runtime whose files and loading rules apply")
    push.add_argument("--revision", metavar="REV",
                      help="the revision id (default: the first 12 hex digits of the commit)")
    push.add_argument("--promote", action="store_true",
                      help="make the revision the stable one: new sessions get it")
    push.add_argument("--canary-share", type=_share, metavar="SHARE",
                      help="promote as canary instead, for this share of new sessions (0..1)")
    push.add_argument("--canary-agent", action="append", metavar="AGENT",
                      help="promote as canary for this agent id (repeatable)")
    push.add_argument("--allow-dirty", action="store_true",
                      help="push HEAD's content even when those files have uncommitted "
                      "changes (which stay out)")
    push.set_defaults(func=cmd_bundles_push)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ctxgate", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the HTTP API")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8080, help="port (default: %(default)s)")
    serve.add_argument("--workers", type=int, default=1,
                       help="worker processes (/metrics sums them)")
    serve.add_argument("--migrate", action="store_true",
                       help="apply migrations first, as the owner (CTXGATE_DATABASE_URL); the "
                       "embedded default always does (CTXGATE_MIGRATE_ON_START)")
    serve.set_defaults(func=cmd_serve)
    sub.add_parser("demo", help="seed tenants acme and globex and walk through one turn",
                   description="Seeds tenants acme and globex (knowledge, a session, a task "
                   "checkpoint, a bundle) through the HTTP API in-process, assembles one turn and "
                   "shows what was kept, dropped and refused. The data stays for `ctxgate serve`."
                   ).set_defaults(func=cmd_demo)
    sub.add_parser("migrate", help="apply migrations").set_defaults(func=cmd_migrate)
    # Listed for --help; main() hands everything after "bench" to bench.main.
    sub.add_parser("bench", add_help=False, help="reproducible benchmark (ctxgate bench --help)")
    keys = sub.add_parser("keys", help="manage API keys").add_subparsers(dest="keys",
                                                                         required=True)
    create = keys.add_parser("create", help="create a key and print it once")
    create.add_argument("--tenant", required=True, help="the tenant the key belongs to")
    create.add_argument("--role", required=True, choices=[r.value for r in Role],
                        help="runtime: assemble and write; ops: read manifests; admin: all")
    create.add_argument("--max-data-level", default="internal",
                        choices=[d.label for d in DataLevel],
                        help="highest sensitivity the key may see (default: %(default)s)")
    create.add_argument("--domain", action="append",
                        help="restrict the key to this domain (repeatable; default: all)")
    create.add_argument("--name", default="cli", help="a label for listings (default: cli)")
    create.add_argument("--quiet", action="store_true",
                        help="print only the secret (for KEY=$(ctxgate keys create ...))")
    create.set_defaults(func=cmd_keys_create)
    listing = keys.add_parser(
        "list", help="list keys (never their secrets)",
        description="Lists keys with their tenant, role, highest data level, domains ('*': "
        "all), name, creation and revocation times ('-': active). Secrets are shown only "
        "once, by `keys create`, and their hashes never.")
    listing.add_argument("--tenant", help="only this tenant's keys (default: every tenant)")
    listing.add_argument("--json", action="store_true",
                         help="one JSON object per key and line, as GET /v1/admin/keys")
    listing.set_defaults(func=cmd_keys_list)
    revoke = keys.add_parser(
        "revoke", help="revoke a key: its next call is refused",
        description="Marks the key revoked (kept for the record; revoking twice is "
        "revoking once). Exit code 1 when no key has that id.")
    revoke.add_argument("key_id", metavar="KEY_ID", help="the key's id (key_..., from "
                        "`keys create` or `keys list`), not its secret")
    revoke.set_defaults(func=cmd_keys_revoke)
    from app.evaluation.cli import add_parser as eval_parser

    eval_parser(sub)
    retention = sub.add_parser("retention", help="delete data past its retention "
                               "(docs/retention.md)").add_subparsers(dest="retention",
                                                                     required=True)
    prune = retention.add_parser(
        "run", help="one retention pass now; prints rows per table",
        description="Deletes manifests, audit records, idle sessions and superseded knowledge "
        "versions older than CTXGATE_*_RETENTION_DAYS, in batches of CTXGATE_RETENTION_BATCH.")
    prune.add_argument("--dry-run", action="store_true",
                       help="count what a run would delete now; delete nothing")
    prune.add_argument("--tenant", action="append",
                       help="only this tenant (repeatable; default: every tenant)")
    prune.add_argument("--json", action="store_true", help="the report as JSON")
    prune.set_defaults(func=cmd_retention_run)
    bundles_push_parser(sub.add_parser("bundles", help="instruction bundles on a running "
                                       "server").add_subparsers(dest="bundles", required=True))
    sub.add_parser(
        "mcp", help="the MCP server on stdio (for agent runtimes)",
        description="Serves ctxgate's MCP tools on stdin/stdout, calling the server at "
        "CTXGATE_URL with CTXGATE_API_KEY for the end user CTXGATE_USER_ID (turn defaults: "
        "CTXGATE_DOMAIN, CTXGATE_DATA_LEVEL). See docs/integrations.md."
    ).set_defaults(func=cmd_mcp)
    hook = sub.add_parser("hook", help="agent runtime hooks").add_subparsers(
        dest="hook", required=True)
    hook.add_parser(
        "claude-code", help="a Claude Code hook: the event's JSON on stdin",
        description="Handles SessionStart, UserPromptSubmit, PostToolUse(Failure), PreCompact "
        "and Stop; configured like `ctxgate mcp`. Never blocks: a failure is explained on "
        "stderr with exit code 1. See docs/integrations.md."
    ).set_defaults(func=cmd_hook_claude_code)
    return p


def main(argv: list[str] | None = None) -> None:
    # platformdirs warns when XDG_RUNTIME_DIR is unset (root shells, containers) while the
    # embedded PostgreSQL looks up its cache; the fallback it takes is fine, and the warning
    # read as an error on every command.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        cmd_bench(argv[1:])
        return
    args = parser().parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        args.func(args)


if __name__ == "__main__":
    main()
