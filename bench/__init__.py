"""``ctxgate bench``: a reproducible benchmark of the running service against its store floor.

Modules: ``generate`` (deterministic data), ``ingest`` (COPY bulk load, index rebuild, keys,
Redis tails), ``floor`` (the store queries one turn issues, without the service), ``load``
(the HTTP load generator, run in its own process), ``report`` (targets and the summary),
``run`` (the pipeline and the command line), ``api_ingest`` (``--api-ingest``: memories and
documents written through the API, one per request against batches, items/s).
"""


def main(argv: list[str] | None = None) -> None:
    """``ctxgate bench [--scale smoke|small|full] [--seed N] [--out PATH] [--duration S]``,
    or ``ctxgate bench --api-ingest [--items SINGLE BATCHED]``."""
    from bench.run import main as run_main

    run_main(argv)
