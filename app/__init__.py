"""ctxgate: a context-assembly gateway for AI agents."""
