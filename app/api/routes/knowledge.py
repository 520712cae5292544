"""Knowledge ingestion: chunked, embedded and indexed for vector and full-text search; one
document or a batch (``{"items": [...]}``, ``app.api.batch``). Listing, reading and deleting
documents by id. A single document too large to embed on the request path is accepted as a
job (202, ``Location: /v1/knowledge/jobs/{job_id}``; ``app.service.ingest``).

A document id travels in the path percent-encoded (``docs%2Fpayments%2Frefund.md``) and is
decoded once, by the server, so ``a%2Fb`` names ``a/b`` and ``a%252Fb`` names ``a%2Fb``;
``{doc_id:path}`` also takes an unencoded ``/``. A client encodes ``.`` and ``..`` as
``%2E``: URL libraries resolve those segments before sending."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from app.api.batch import check_each
from app.api.deps import ContainerDep, ReaderDep, RuntimeDep, check_tenant_claim, require
from app.api.embeddings import check_dimensions
from app.api.routing import OrjsonRoute
from app.api.schemas import (
    DocumentBatchIn,
    DocumentBatchOut,
    DocumentIn,
    DocumentIngested,
    DocumentList,
    DocumentOut,
    DocumentWriteIn,
    Id,
    IngestJobOut,
    MintedId,
    Problem,
)
from app.core.errors import ForbiddenScope
from app.core.model import DataLevel, Principal, Role
from app.ports import IngestJob

router = APIRouter(tags=["knowledge"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 413, 422)}
READ_ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"model": Problem} for s in (401, 403, 404, 422)}
DocId = Annotated[Id, Path(description="percent-encoded; decoded once")]
# Deleting is a write: the runtime keys that ingest, and admins; ops keys only read.
WriterDep = Annotated[Principal, require(Role.RUNTIME, Role.ADMIN)]


def job_url(job: IngestJob) -> str:
    return f"/v1/knowledge/jobs/{job.job_id}"


@router.post("/v1/knowledge/documents", status_code=201,
             response_model=DocumentIngested | DocumentBatchOut,
             responses={**ERRORS, 202: {  # type: ignore[dict-item]
                 "model": IngestJobOut, "description": "accepted as a background job; "
                 "poll the Location header (GET /v1/knowledge/jobs/{job_id})"}})
async def ingest_document(body: DocumentWriteIn, principal: RuntimeDep,
                          container: ContainerDep
                          ) -> DocumentIngested | DocumentBatchOut | Response:
    """Ingest one document, or a batch of up to 100 (``{"items": [...]}``: every chunk
    embedded in one call, all documents in one transaction; an item the key may not write
    fails the batch and nothing is written). A document given as ``chunks`` carries the
    client's embeddings: only the other documents' chunks reach the embedder.

    A single document given as ``text`` longer than ``CTXGATE_INGEST_SYNC_CHUNKS`` chunks'
    worth of tokens (default 4 x 320) is validated and checked here, then accepted as a job
    and embedded in the background: 202 with the job (``Location``), its version current once
    the job is ``done``. Smaller texts, client chunks and batches are ingested at once: 201."""
    items, batch = (body.items, True) if isinstance(body, DocumentBatchIn) else ([body], False)
    check_dimensions(items, dim=container.embedder.dim, batch=batch)

    def check(item: DocumentIn) -> None:
        check_tenant_claim(principal, item.tenant_id)
        # A key may only write what it could read: its level cap and domains bound ingest too.
        if DataLevel.parse(item.sensitivity) > principal.max_data_level:
            raise ForbiddenScope("the document's sensitivity exceeds the key's maximum")
        if principal.domains is not None and item.domain not in principal.domains:
            raise ForbiddenScope("the document's domain is outside the key's domains")

    check_each(items, check, batch=batch)
    if not batch:
        item = items[0]
        done = await container.ingest.submit(tenant_id=principal.tenant_id,
                                             document=item.to_domain(), content=item.content())
        if isinstance(done, IngestJob):
            return Response(IngestJobOut.of(done).model_dump_json(), status_code=202,
                            media_type="application/json",
                            headers={"Location": job_url(done)})
        return DocumentIngested(doc_id=item.doc_id, version=item.version, chunks=done)
    counts = await container.knowledge.ingest_many(
        tenant_id=principal.tenant_id, documents=[(item.to_domain(), item.content())
                                                  for item in items])
    out = [DocumentIngested(doc_id=item.doc_id, version=item.version, chunks=n)
           for item, n in zip(items, counts, strict=True)]
    return DocumentBatchOut(items=out) if batch else out[0]


@router.get("/v1/knowledge/documents", response_model=DocumentList, responses=READ_ERRORS)
async def list_documents(
    principal: ReaderDep, container: ContainerDep,
    cursor: Annotated[str | None, Query(max_length=1024,
                                        description="next_cursor of the previous page")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> DocumentList:
    """The tenant's documents by id, each by its current version (no text); only those within
    the key's data level and domains."""
    page, nxt = await container.knowledge.list_documents(principal=principal, cursor=cursor,
                                                         limit=limit)
    return DocumentList(documents=[DocumentOut.of(d) for d in page], next_cursor=nxt)


@router.get("/v1/knowledge/documents/{doc_id:path}", response_model=DocumentOut,
            responses=READ_ERRORS)
async def get_document(doc_id: DocId, principal: ReaderDep,
                       container: ContainerDep) -> DocumentOut:
    """One document's metadata; another tenant's, or one outside the key's bounds, is 404."""
    return DocumentOut.of(await container.knowledge.get_document(principal=principal,
                                                                 doc_id=doc_id))


@router.delete("/v1/knowledge/documents/{doc_id:path}", status_code=204,
               response_class=Response, responses=READ_ERRORS)
async def delete_document(doc_id: DocId, principal: WriterDep,
                          container: ContainerDep) -> Response:
    """Every version of the document and its chunks; audited as ``knowledge.deleted``."""
    await container.knowledge.delete_document(principal=principal, doc_id=doc_id)
    return Response(status_code=204)


@router.get("/v1/knowledge/jobs/{job_id}", response_model=IngestJobOut, responses=READ_ERRORS)
async def get_ingest_job(job_id: Annotated[MintedId, Path()], principal: ReaderDep,
                         container: ContainerDep) -> IngestJobOut:
    """An ingest job's status and progress (chunks embedded of the total), and once ``done``
    the written version's chunk count; another tenant's job is 404, as a missing one is."""
    return IngestJobOut.of(await container.ingest.get(principal=principal, job_id=job_id))
