"""``python -m bench``: the same as ``ctxgate bench``."""

from bench.run import main

main()
