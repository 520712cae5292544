#!/bin/sh
# Container entry point.
#   serve (default)  apply migrations, then serve on 0.0.0.0:8080
#   migrate          apply migrations and exit (the Kubernetes migration Job)
#   anything else    run as given, e.g. `ctxgate keys create --tenant acme --role runtime`
# In a container both store URLs are required: the embedded default is for laptops, and
# `ctxgate serve` with both set starts nothing embedded.
set -eu

cmd="${1:-serve}"
case "$cmd" in
  serve)
    : "${CTXGATE_DATABASE_URL:?must be set (the owner/migrator URL)}"
    : "${CTXGATE_REDIS_URL:?must be set}"
    ctxgate migrate
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
