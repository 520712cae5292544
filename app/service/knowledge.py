"""Knowledge ingestion: chunk, count, scan, embed, index; a new version supersedes the old
chunks. Each chunk's token count and detector findings are made here, once, and stored with
it, so no turn re-tokenizes or rescans what it retrieves. A batch (``ingest_many``) makes one
embedder call for all its chunks and one transaction for all its documents. A document may
come pre-chunked with the client's embeddings (``ClientChunk``): its chunks are stored as
given, counted and scanned, and never reach the embedder. ``ingest_paced`` is the same ingest
of one large text for a background job (``app.service.ingest``): embedded in batches, paced
by its caller, written in the same one transaction at the end.

Management (list, get, delete) is bounded by the key: a document above its data level or
outside its domains is absent to it (404), as is another tenant's. Listing pages by
``doc_id`` with an opaque cursor; a delete is audited as ``knowledge.deleted``."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from app.core.chunking import chunk_text
from app.core.embedding_space import client_made
from app.core.errors import InvalidRequest, NotFound
from app.core.guards.safety import Detector
from app.core.ids import normalize_id
from app.core.model import Principal
from app.core.refs import doc_ref
from app.ports import (
    AuditRecord,
    ClientChunk,
    DocumentBounds,
    DocumentInfo,
    Embedder,
    KnowledgeStore,
    NewChunk,
    NewDocument,
    TokenCounter,
)
from app.service.pacing import DutyCycle

CHUNK_TOKENS = 320
CHUNK_OVERLAP = 32


def encode_cursor(doc_id: str) -> str:
    """The page cursor after ``doc_id``: opaque to clients (URL-safe base64 of the id)."""
    return base64.urlsafe_b64encode(doc_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The ``doc_id`` a cursor continues after; ``InvalidRequest`` if it is not one of ours."""
    try:
        return normalize_id(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
                            .decode())
    except ValueError:  # binascii.Error, UnicodeDecodeError, an invalid id
        raise InvalidRequest("cursor is not one this server gave") from None


def bounds(principal: Principal) -> DocumentBounds:
    """The documents ``principal`` may manage: those it could have ingested."""
    return DocumentBounds(tenant_id=principal.tenant_id, max_level=principal.max_data_level,
                          domains=principal.domains)


class KnowledgeService:
    def __init__(self, store: KnowledgeStore, embedder: Embedder, count_tokens: TokenCounter,
                 scan: Detector) -> None:
        self._store = store
        self._embedder = embedder
        self._count = count_tokens
        self._scan = scan

    async def ingest(self, *, tenant_id: str, document: NewDocument,
                     content: str | Sequence[ClientChunk]) -> int:
        return (await self.ingest_many(tenant_id=tenant_id, documents=[(document, content)]))[0]

    async def ingest_many(self, *, tenant_id: str,
                          documents: Sequence[tuple[NewDocument, str | Sequence[ClientChunk]]]
                          ) -> list[int]:
        """Each document's chunks counted and scanned -- its text chunked here, or the
        client's chunks as given --, the chunks without a client embedding embedded in one
        ``embed_passages`` call (none: no call), then all written in one transaction (all or
        nothing). Returns each document's chunk count, in order."""
        pieces: list[list[ClientChunk] | list[str]] = [
            list(content) if not isinstance(content, str)
            else chunk_text(content, max_tokens=CHUNK_TOKENS, overlap_tokens=CHUNK_OVERLAP,
                            count_tokens=self._count)
            for _, content in documents]
        flat = [p for ps in pieces for p in ps if isinstance(p, str)]
        vectors = iter(await self._embedder.embed_passages(flat) if flat else [])
        model = self._embedder.model  # each chunk records which space its vector is of
        out: list[NewDocument] = []
        for (document, _), ps in zip(documents, pieces, strict=True):
            made = [(p, next(vectors), model) if isinstance(p, str)
                    else (p.text, p.embedding, client_made(model)) for p in ps]
            chunks = tuple(self._chunk(i, text, vector, embedder)
                           for i, (text, vector, embedder) in enumerate(made))
            out.append(replace(document, chunks=chunks))
        return await self._store.upsert_many(tenant_id=tenant_id, documents=out)

    def is_small(self, content: str | Sequence[ClientChunk], *, max_chunks: int) -> bool:
        """Whether ingesting ``content`` is quick enough for the request path: the client's
        chunks (nothing to embed), or a text of at most ``max_chunks`` chunks' worth of
        tokens (one tokenizer pass; chunking and embedding cost far more)."""
        if not isinstance(content, str):
            return True
        limit = max_chunks * CHUNK_TOKENS
        # A prefix first: a prefix's tokens (within one, at the cut) are no more than the
        # whole text's, so a large text is known large without tokenizing all of it (17 ms
        # for the 500k characters a document may hold).
        head = content[:limit * 8]
        if self._count(head) > limit:
            return False
        return len(head) == len(content) or self._count(content) <= limit

    async def ingest_paced(self, *, tenant_id: str, document: NewDocument, text: str,
                           batch: int, pace: DutyCycle,
                           progress: Callable[[int, int], Awaitable[None]]) -> int:
        """``ingest`` of one text, made to share the CPU: chunked off the event loop, then
        embedded ``batch`` chunks per ``embed_passages`` call, each batch counted and scanned
        and ``await progress(done, total)`` reported as one ``pace`` step (the step rests
        after it, so turns keep most of the CPU; raising in ``progress`` abandons the
        ingest). Nothing is written until every chunk is embedded; then the version is
        written in one transaction, exactly as ``ingest`` writes it. Returns the chunk
        count."""
        texts = await asyncio.to_thread(chunk_text, text, max_tokens=CHUNK_TOKENS,
                                        overlap_tokens=CHUNK_OVERLAP, count_tokens=self._count)
        model = self._embedder.model
        chunks: list[NewChunk] = []
        for start in range(0, len(texts), batch):
            part = texts[start:start + batch]
            async with pace.step():  # progress inside: reported before the rest, not after
                vectors = await self._embedder.embed_passages(part)
                chunks += [self._chunk(start + i, t, v, model)
                           for i, (t, v) in enumerate(zip(part, vectors, strict=True))]
                await progress(len(chunks), len(texts))
        return await self._store.upsert(tenant_id=tenant_id,
                                        document=replace(document, chunks=tuple(chunks)))

    def _chunk(self, chunk_no: int, text: str, vector: Sequence[float], embedder: str
               ) -> NewChunk:
        return NewChunk(chunk_no=chunk_no, text=text, tokens=self._count(text),
                        embedding=vector, findings=tuple(self._scan(text)), embedder=embedder)

    async def list_documents(self, *, principal: Principal, cursor: str | None, limit: int
                   ) -> tuple[list[DocumentInfo], str | None]:
        """A page of documents and the cursor of the next page (None: this was the last)."""
        after = None if cursor is None else decode_cursor(cursor)
        rows = await self._store.list_documents(bounds=bounds(principal), after=after,
                                                limit=limit + 1)
        more = len(rows) > limit
        page = rows[:limit]
        return page, encode_cursor(page[-1].doc_id) if more else None

    async def get_document(self, *, principal: Principal, doc_id: str) -> DocumentInfo:
        info = await self._store.get_document(bounds=bounds(principal), doc_id=doc_id)
        if info is None:
            raise NotFound("document not found")
        return info

    async def delete_document(self, *, principal: Principal, doc_id: str) -> None:
        def audit(info: DocumentInfo) -> AuditRecord:
            return AuditRecord(turn_id=None, kind="knowledge.deleted",
                               principal=principal.key_id, ref=doc_ref(doc_id), rule=None,
                               detail={"version": info.version, "revision": info.revision,
                                       "versions": info.versions, "chunks": info.chunks})

        if await self._store.delete_document(bounds=bounds(principal), doc_id=doc_id,
                                             audit=audit) is None:
            raise NotFound("document not found")
