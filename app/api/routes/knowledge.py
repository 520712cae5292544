"""Knowledge ingestion: chunked, embedded and indexed for vector and full-text search; one
document or a batch (``{"items": [...]}``, ``app.api.batch``)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.batch import check_each
from app.api.deps import ContainerDep, RuntimeDep, check_tenant_claim
from app.api.routing import OrjsonRoute
from app.api.schemas import (
    DocumentBatchIn,
    DocumentBatchOut,
    DocumentIn,
    DocumentIngested,
    DocumentWriteIn,
    Problem,
)
from app.core.errors import ForbiddenScope
from app.core.model import DataLevel

router = APIRouter(tags=["knowledge"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 413, 422)}


@router.post("/v1/knowledge/documents", status_code=201,
             response_model=DocumentIngested | DocumentBatchOut,
             responses=ERRORS)  # type: ignore[arg-type]
async def ingest_document(body: DocumentWriteIn, principal: RuntimeDep,
                          container: ContainerDep) -> DocumentIngested | DocumentBatchOut:
    """Ingest one document, or a batch of up to 100 (``{"items": [...]}``: every chunk
    embedded in one call, all documents in one transaction; an item the key may not write
    fails the batch and nothing is written)."""
    items, batch = (body.items, True) if isinstance(body, DocumentBatchIn) else ([body], False)

    def check(item: DocumentIn) -> None:
        check_tenant_claim(principal, item.tenant_id)
        # A key may only write what it could read: its level cap and domains bound ingest too.
        if DataLevel.parse(item.sensitivity) > principal.max_data_level:
            raise ForbiddenScope("the document's sensitivity exceeds the key's maximum")
        if principal.domains is not None and item.domain not in principal.domains:
            raise ForbiddenScope("the document's domain is outside the key's domains")

    check_each(items, check, batch=batch)
    counts = await container.knowledge.ingest_many(
        tenant_id=principal.tenant_id, documents=[(item.to_domain(), item.text)
                                                  for item in items])
    out = [DocumentIngested(doc_id=item.doc_id, version=item.version, chunks=n)
           for item, n in zip(items, counts, strict=True)]
    return DocumentBatchOut(items=out) if batch else out[0]
