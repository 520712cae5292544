"""Value encodings shared by the Postgres adapters.

- JSON goes to ``jsonb`` parameters as serialized text (``dumps``): the pool's jsonb codec
  (``db.py``) sends a ``str`` as is, refuses anything else, and parses jsonb columns with
  orjson on read, so values read back are already Python objects.
- A query vector is bound as a list and sent by pgvector's binary codec, registered on every
  app-role connection (``db.py``). Measured for one 384-d vector: building the text literal
  ``[x,y,...]`` costs ~1.3 ms of Python and the round trip ~0.7 ms, against ~0.3 ms binary.
- Bulk ingest sends all embeddings of a document as one ``text[]`` of literals cast to
  ``vector`` in SQL (``vector_literal``): asyncpg cannot bind a list of vectors as
  ``vector[]`` through the codec, and one statement per document beats executemany.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def vector_literal(values: Sequence[float]) -> str:
    # repr(float) round-trips exactly; pgvector stores float4, so precision is not lost here.
    return "[" + ",".join(repr(float(v)) for v in values) + "]"
