"""``ctxgate eval``: the seeds' regression sets (facts, isolation, compaction) as data, run
against a server through its public API, scored with the section-seven metrics
(docs/eval.md)."""
