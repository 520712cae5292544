"""Client-supplied embeddings: one check for every field that carries a vector.

``query_embedding`` of a turn, ``embedding`` of a memory write and of a document's ``chunks``
are ``Vector``: the schema takes a list of numbers and refuses (422, the field's ``loc``)
values that would not survive as the float32 that pgvector stores -- a value beyond float32's
range (``1e39`` becomes infinite), and a vector whose squared length is not a positive finite
float32, for which a cosine is undefined (all zeros) or overflows. ``NaN`` and ``Infinity``
are not JSON at all (400 ``malformed-json`` from the body parser); the check refuses them too
for any other caller. The dimension is the server's embedder's, known only at request time:
``check_dimensions`` (in the route, before anything is written) answers a wrong one with the
same 422 shape, naming the field and the expected dimension. A vector that passes is stored
and searched as given; the embedder is not asked for it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, Protocol

from fastapi.exceptions import RequestValidationError
from pydantic import AfterValidator, Field

FLOAT32_MAX = 3.4028234663852886e38
MAX_DIM = 4096  # the schema's bound on the list; the embedder's own dim is checked per request
Loc = tuple[str | int, ...]


def _float32_vector(values: list[float]) -> list[float]:
    if not all(math.isfinite(x) and abs(x) <= FLOAT32_MAX for x in values):
        raise ValueError(f"embedding values must be finite and within float32 range "
                         f"(|x| <= {FLOAT32_MAX:.4g})")
    square = math.fsum(x * x for x in values)
    if not 0.0 < square <= FLOAT32_MAX:
        raise ValueError("an embedding needs a nonzero length whose square fits float32 "
                         "(cosine distance is undefined otherwise)")
    return values


Vector = Annotated[list[float], Field(min_length=1, max_length=MAX_DIM),
                   AfterValidator(_float32_vector)]


class CarriesVectors(Protocol):
    def vectors(self) -> Iterator[tuple[Loc, Sequence[float]]]:
        """Each client-supplied vector of the body, with its ``loc`` below the body."""
        ...


def check_dimensions(bodies: Iterable[CarriesVectors], *, dim: int, batch: bool) -> None:
    """422 (``RequestValidationError``, every offending field's ``loc``) unless every vector
    of ``bodies`` has ``dim`` values; in a batch, the ``loc`` names the item's index."""
    errors = [
        {"loc": ("body", *(("items", i) if batch else ()), *loc), "type": "embedding_dimension",
         "msg": f"embedding has {len(v)} dimensions; the server's embedder expects {dim}"}
        for i, body in enumerate(bodies) for loc, v in body.vectors() if len(v) != dim]
    if errors:
        raise RequestValidationError(errors)
