"""Knowledge ingestion: chunk, count, scan, embed, index; a new version supersedes the old
chunks. Each chunk's token count and detector findings are made here, once, and stored with
it, so no turn re-tokenizes or rescans what it retrieves. A batch (``ingest_many``) makes one
embedder call for all its chunks and one transaction for all its documents."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from app.core.chunking import chunk_text
from app.core.guards.safety import Detector
from app.ports import Embedder, KnowledgeStore, NewChunk, NewDocument, TokenCounter

CHUNK_TOKENS = 320
CHUNK_OVERLAP = 32


class KnowledgeService:
    def __init__(self, store: KnowledgeStore, embedder: Embedder, count_tokens: TokenCounter,
                 scan: Detector) -> None:
        self._store = store
        self._embedder = embedder
        self._count = count_tokens
        self._scan = scan

    async def ingest(self, *, tenant_id: str, document: NewDocument, text: str) -> int:
        return (await self.ingest_many(tenant_id=tenant_id, documents=[(document, text)]))[0]

    async def ingest_many(self, *, tenant_id: str,
                          documents: Sequence[tuple[NewDocument, str]]) -> list[int]:
        """Each (document, text) chunked and scanned, every chunk of the batch embedded in one
        ``embed_passages`` call, then all written in one transaction (all or nothing).
        Returns each document's chunk count, in order."""
        pieces = [chunk_text(text, max_tokens=CHUNK_TOKENS, overlap_tokens=CHUNK_OVERLAP,
                             count_tokens=self._count) for _, text in documents]
        flat = [p for ps in pieces for p in ps]
        vectors = iter(await self._embedder.embed_passages(flat) if flat else [])
        out: list[NewDocument] = []
        for (document, _), ps in zip(documents, pieces, strict=True):
            chunks = tuple(
                NewChunk(chunk_no=i, text=p, tokens=self._count(p), embedding=next(vectors),
                         findings=tuple(self._scan(p)))
                for i, p in enumerate(ps))
            out.append(replace(document, chunks=chunks))
        return await self._store.upsert_many(tenant_id=tenant_id, documents=out)
