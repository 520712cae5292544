"""Knowledge ingestion: chunked, embedded and indexed for vector and full-text search."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ContainerDep, RuntimeDep, check_tenant_claim
from app.api.schemas import DocumentIn, DocumentIngested, Problem

router = APIRouter(tags=["knowledge"])
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 413, 422)}


@router.post("/v1/knowledge/documents", status_code=201, response_model=DocumentIngested,
             responses=ERRORS)  # type: ignore[arg-type]
async def ingest_document(body: DocumentIn, principal: RuntimeDep,
                          container: ContainerDep) -> DocumentIngested:
    check_tenant_claim(principal, body.tenant_id)
    chunks = await container.knowledge.ingest(
        tenant_id=principal.tenant_id, document=body.to_domain(), text=body.text)
    return DocumentIngested(doc_id=body.doc_id, version=body.version, chunks=chunks)
