"""Render a ``Layout`` as OpenAI Chat Completions messages.

Contract: ``render(layout)`` returns ``Rendered`` with ``system=None`` (the system text is the
first message) and the messages:

1. the stable prefix — every trusted stable text joined by blank lines — as the ONE
   ``system`` message, first; none when there is no stable text;
2. the conversation in its own roles: a ``Say`` as a ``{"role", "content"}`` message; a
   ``ToolRound`` as one assistant message with ``content: null`` and ``tool_calls`` (parallel
   calls share it) followed by one ``tool`` message per result (``tool_call_id``); a result's
   text is fenced data;
3. the final user turn, as consecutive user messages: the task state, the reviewed
   references, the fenced data (one message, ``DATA_PREFACE`` first), then the query last.

No ``system`` message ever follows a non-system one. Why task state and references go into
the final user turn rather than into the leading system message: OpenAI's prompt cache hits
"only for exact prefix matches within a prompt" and asks to "place static content like
instructions and examples at the beginning of your prompt, and put variable content, such as
user-specific information, at the end" (platform.openai.com/docs/guides/prompt-caching). In
the system message they would sit in front of the whole conversation history, so every
checkpoint revision and every turn's retrievals would change the prompt right after the
stable text and no turn could reuse the cached history. At the end, the system message is
byte-identical for equal ``stable_prefix_sha256`` and the history is append-only, so a turn's
prompt shares everything up to its final user turn with the previous one.

``cache_breakpoint`` is ``messages[0]`` when there is a system message: marked on the
envelope, because a non-standard key inside a message would be refused by the API.
"""

from __future__ import annotations

from app.core.model import CacheBreakpoint
from app.core.render.shared import Layout, Message, Rendered, Say, ToolRound


def _round(item: ToolRound) -> list[Message]:
    calls = [{"id": c.id, "type": "function",
              "function": {"name": c.name, "arguments": c.arguments}} for c in item.calls]
    return [{"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": r.id, "content": r.text} for r in item.results)]


def render(layout: Layout) -> Rendered:
    out: list[Message] = []
    if layout.stable:
        out.append({"role": "system", "content": "\n\n".join(layout.stable)})
    for item in layout.conversation:
        if isinstance(item, Say):
            out.append({"role": item.role, "content": item.text})
        else:
            out += _round(item)
    final = ["\n\n".join(layout.task)] if layout.task else []
    final += [t for t in (layout.reviewed, layout.data) if t is not None]
    out += ({"role": "user", "content": text} for text in (*final, *layout.query))
    breakpoint_ = CacheBreakpoint(location="messages", index=0) if layout.stable else None
    return Rendered(system=None, messages=tuple(out), cache_breakpoint=breakpoint_)
