"""Knowledge ingestion: chunked, embedded and indexed for vector and full-text search."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ContainerDep, RuntimeDep, check_tenant_claim
from app.api.routing import OrjsonRoute
from app.api.schemas import DocumentIn, DocumentIngested, Problem
from app.core.errors import ForbiddenScope

router = APIRouter(tags=["knowledge"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 413, 422)}


@router.post("/v1/knowledge/documents", status_code=201, response_model=DocumentIngested,
             responses=ERRORS)  # type: ignore[arg-type]
async def ingest_document(body: DocumentIn, principal: RuntimeDep,
                          container: ContainerDep) -> DocumentIngested:
    check_tenant_claim(principal, body.tenant_id)
    document = body.to_domain()
    # A key may only write what it could read: its level cap and its domains bound ingest too.
    if document.sensitivity > principal.max_data_level:
        raise ForbiddenScope("the document's sensitivity exceeds the key's maximum")
    if principal.domains is not None and document.domain not in principal.domains:
        raise ForbiddenScope("the document's domain is outside the key's domains")
    chunks = await container.knowledge.ingest(
        tenant_id=principal.tenant_id, document=document, text=body.text)
    return DocumentIngested(doc_id=body.doc_id, version=body.version, chunks=chunks)
