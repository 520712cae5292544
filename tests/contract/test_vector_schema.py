"""The startup dimension check on the real schema: an embedder of another dimension than the
vector columns' keeps the service from starting, with a message naming the columns."""

from __future__ import annotations

import pytest

from app.adapters.postgres.vector_schema import EmbeddingDimMismatch
from app.main import Container
from app.settings import Settings


async def test_a_container_with_the_wrong_dimension_refuses_to_start(settings: Settings
                                                                     ) -> None:
    wrong = settings.model_copy(update={
        "embedder": "openai", "embedding_dim": 1536,
        "openai_base_url": "http://127.0.0.1:9/v1"})  # never called: the check comes first
    with pytest.raises(EmbeddingDimMismatch) as err:
        await Container.open(wrong)
    message = str(err.value)
    assert "1536-dimensional" in message
    assert "memories.embedding is vector(384)" in message
    assert "knowledge_chunks.embedding is vector(384)" in message


async def test_the_right_dimension_starts(settings: Settings) -> None:
    container = await Container.open(settings)
    try:
        assert container.embedder.dim == settings.embedding_dim == 384
    finally:
        await container.close()
