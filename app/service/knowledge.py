"""Knowledge ingestion: chunk, embed, index; a new version supersedes the old chunks."""

from __future__ import annotations

from dataclasses import replace

from app.core.chunking import chunk_text
from app.ports import Embedder, KnowledgeStore, NewChunk, NewDocument, TokenCounter

CHUNK_TOKENS = 320
CHUNK_OVERLAP = 32


class KnowledgeService:
    def __init__(self, store: KnowledgeStore, embedder: Embedder, count_tokens: TokenCounter
                 ) -> None:
        self._store = store
        self._embedder = embedder
        self._count = count_tokens

    async def ingest(self, *, tenant_id: str, document: NewDocument, text: str) -> int:
        pieces = chunk_text(text, max_tokens=CHUNK_TOKENS, overlap_tokens=CHUNK_OVERLAP,
                            count_tokens=self._count)
        vectors = await self._embedder.embed_passages(pieces) if pieces else []
        chunks = tuple(
            NewChunk(chunk_no=i, text=p, tokens=self._count(p), embedding=v)
            for i, (p, v) in enumerate(zip(pieces, vectors, strict=True))
        )
        return await self._store.upsert(
            tenant_id=tenant_id, document=replace(document, chunks=chunks))
