"""Choose the embedder named by ``settings.embedder``: ``"e5"`` (offline default) or ``"openai"``.

Contract: returns an object satisfying ``app.ports.Embedder``; an unknown name, or an
``embedding_dim`` that the chosen model cannot produce, raises ``ValueError`` at startup
rather than at the first request. Nothing is loaded here (E5 loads lazily or on ``warm()``).
"""

from __future__ import annotations

from app.adapters.embedders.e5 import DIM as E5_DIM
from app.adapters.embedders.e5 import E5Embedder
from app.adapters.embedders.openai_http import OpenAIEmbedder
from app.ports import Embedder
from app.settings import Settings


def make_embedder(settings: Settings) -> Embedder:
    name = settings.embedder.lower()
    if name == "e5":
        if settings.embedding_dim != E5_DIM:
            raise ValueError(f"embedder 'e5' has dim {E5_DIM}, settings say "
                             f"{settings.embedding_dim}")
        return E5Embedder()
    if name == "openai":
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return OpenAIEmbedder(settings.openai_base_url, key, settings.openai_embedding_model,
                              settings.embedding_dim)
    raise ValueError(f"unknown embedder {settings.embedder!r}; expected 'e5' or 'openai'")
