#!/bin/sh
# Container entry point.
#   serve (default)  serve on 0.0.0.0:8080 as the app role; no migration unless asked
#                    (CTXGATE_MIGRATE_ON_START=true, which needs the owner's URL)
#   migrate          apply migrations as the owner and exit (the migration Job / service)
#   anything else    run as given, e.g. `ctxgate keys create --tenant acme --role runtime`
# In a container the store URLs are required: the embedded default is for laptops. The
# serving container needs only the app role's CTXGATE_APP_DATABASE_URL; the owner's
# CTXGATE_DATABASE_URL belongs to the migration alone (docs/deploy.md).
set -eu

cmd="${1:-serve}"
case "$cmd" in
  serve)
    if [ -z "${CTXGATE_APP_DATABASE_URL:-}${CTXGATE_DATABASE_URL:-}" ]; then
      echo "CTXGATE_APP_DATABASE_URL must be set (the app role's URL)" >&2
      exit 1
    fi
    : "${CTXGATE_REDIS_URL:?must be set}"
    exec ctxgate serve --host 0.0.0.0 --port 8080
    ;;
  migrate)
    : "${CTXGATE_DATABASE_URL:?must be set (the owner/migrator URL)}"
    exec ctxgate migrate
    ;;
  *)
    exec "$@"
    ;;
esac
