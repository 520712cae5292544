"""Which embedder made a stored vector, and which stored vectors a query may meet.

Every stored vector records its provenance in an ``embedder`` column (migration 0018):

- a server model id (``Embedder.model``, e.g. ``multilingual-e5-small-q4``): the server
  embedded the row's text with that model;
- ``client:<model>``: the client supplied the vector while the server's embedder was
  ``<model>``. The server checks only its dimension and takes it as a vector of that space;
  it can never re-embed it (it does not know the client's model);
- NULL: either written before provenance was recorded, and then it belongs to ``legacy``
  (the embedder configured when the first worker started after 0018), or, in a table whose
  rows are embedded after they are written (``session_events``), not embedded yet.

A query vector (the server's or a client's ``query_embedding``) lives in the current space:
a vector search compares it only with rows whose provenance is ``accepted``. Every other row
is still found by words, and a stale server-made row is re-embedded in the background.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CLIENT = "client:"

# current: made in the current space (by the server, or NULL claimed for it); stale: made by
# another server model, re-embedded in the background; client / client_stale: a client's
# vector of the current / another space (the latter waits for its client to re-send it);
# pending: not embedded yet (another job's queue).
Provenance = Literal["current", "stale", "client", "client_stale", "pending"]
PROVENANCES: tuple[Provenance, ...] = ("current", "stale", "client", "client_stale", "pending")


def client_made(model: str) -> str:
    """The provenance of a vector a client supplied while the server embedded with ``model``."""
    return CLIENT + model


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingSpace:
    current: str  # the configured embedder's model id
    legacy: str  # what a NULL provenance means where NULL is not "pending"

    @property
    def accepted(self) -> tuple[str, str]:
        """The provenances a query vector may be compared with."""
        return self.current, client_made(self.current)

    def provenance(self, stored: str | None, *, null_is_legacy: bool = True) -> Provenance:
        """What a row with ``stored`` in its ``embedder`` column is to this space."""
        if stored is None:
            if not null_is_legacy:
                return "pending"
            stored = self.legacy
        if stored.startswith(CLIENT):
            return "client" if stored == client_made(self.current) else "client_stale"
        return "current" if stored == self.current else "stale"
