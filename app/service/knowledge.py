"""Knowledge ingestion: chunk, count, scan, embed, index; a new version supersedes the old
chunks. Each chunk's token count and detector findings are made here, once, and stored with
it, so no turn re-tokenizes or rescans what it retrieves."""

from __future__ import annotations

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
        pieces = chunk_text(text, max_tokens=CHUNK_TOKENS, overlap_tokens=CHUNK_OVERLAP,
                            count_tokens=self._count)
        vectors = await self._embedder.embed_passages(pieces) if pieces else []
        chunks = tuple(
            NewChunk(chunk_no=i, text=p, tokens=self._count(p), embedding=v,
                     findings=tuple(self._scan(p)))
            for i, (p, v) in enumerate(zip(pieces, vectors, strict=True))
        )
        return await self._store.upsert(
            tenant_id=tenant_id, document=replace(document, chunks=chunks))
