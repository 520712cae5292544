"""Render compiled segments for a model API: ``render(segments, rendering)``.

Both renderings draw from one classification (``shared.layout``) and differ only in shape:
``openai`` (Chat Completions messages, ``render/openai.py``) and ``anthropic`` (Messages API
top-level ``system`` blocks and alternating messages, ``render/anthropic.py``). Each module
states its contract and why.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.model import Rendering, Segment
from app.core.render import anthropic, openai
from app.core.render.shared import DATA_PREFACE, Rendered, fence, layout, neutralize

__all__ = ["DATA_PREFACE", "Rendered", "fence", "neutralize", "render"]

_RENDERERS = {Rendering.OPENAI: openai.render, Rendering.ANTHROPIC: anthropic.render}


def render(segments: Sequence[Segment], rendering: Rendering = Rendering.OPENAI) -> Rendered:
    return _RENDERERS[rendering](layout(segments))
