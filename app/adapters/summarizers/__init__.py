"""Summarizer adapters: network implementations of ``app.core.compaction.AsyncSummarizer``."""
