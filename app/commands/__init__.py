"""The operator's commands of ``ctxgate`` that work on the stores directly (embedded or
configured), beside the server rather than through it."""
