# syntax=docker/dockerfile:1
# ctxgate image: a builder stage with the project's venv, a slim non-root runtime stage.
#
# The project is installed editable in /srv/ctxgate because app.adapters.postgres.migrate reads
# the top-level alembic/ directory next to app/ at run time; both stages keep the same paths.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TIKTOKEN_CACHE_DIR=/srv/ctxgate/.cache/tiktoken
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /srv/ctxgate
# Dependencies first, pinned and hash-checked from the lock (requirements.lock is uv.lock
# exported; tests/integration/test_lockfile.py keeps them equal), so code edits do not
# reinstall them and the image holds exactly what CI tested.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock
COPY pyproject.toml ./
COPY clients/python/ ./clients/python/
COPY app/ ./app/
COPY bench/ ./bench/
RUN pip install --no-deps -e .
COPY alembic/ ./alembic/
COPY alembic.ini ./
# Seed the tokenizer vocabularies now, so the runtime needs neither network nor a writable cache.
RUN python -c "from app.adapters.tokenizers.tiktoken_counter import TiktokenCounter as T; [T(n)('warm') for n in ('o200k_base', 'cl100k_base')]" \
 && python -m compileall -q app alembic

FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TIKTOKEN_CACHE_DIR=/srv/ctxgate/.cache/tiktoken \
    CTXGATE_DATA_DIR=/var/lib/ctxgate
RUN groupadd --system --gid 10001 ctxgate \
 && useradd --system --uid 10001 --gid ctxgate --home-dir /var/lib/ctxgate \
      --shell /usr/sbin/nologin ctxgate \
 && install -d -o ctxgate -g ctxgate -m 0750 /var/lib/ctxgate
COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /srv/ctxgate /srv/ctxgate
COPY --chmod=0755 deploy/docker-entrypoint.sh /usr/local/bin/ctxgate-entrypoint
WORKDIR /srv/ctxgate
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["ctxgate-entrypoint"]
CMD ["serve"]
