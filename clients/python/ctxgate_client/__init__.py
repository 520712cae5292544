"""ctxgate_client: a typed client (sync and async) for the ctxgate HTTP API.

    from ctxgate_client import CtxgateClient, Message

    with CtxgateClient("http://127.0.0.1:8080", api_key) as ctx:
        turn = ctx.assemble_context(user_id="alice@acme.com", session_id="s1",
                                    query="refund timeout?", budget=8000,
                                    append_events=[Message(role="user", content="hi")])
        print(turn.envelope.messages)

Errors: ``ctxgate_client.errors`` (one class per problem+json status, ``type`` for finer
cases). Retries: ``RetryPolicy``.
"""

from ctxgate_client._async_client import AsyncCtxgateClient
from ctxgate_client._call import RetryPolicy
from ctxgate_client._sync_client import CtxgateClient
from ctxgate_client.errors import (
    BadRequestError,
    BudgetTooSmallError,
    ConflictError,
    CtxgateConnectionError,
    CtxgateError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    ServerError,
    StaleRevisionError,
    UnauthorizedError,
    UnavailableError,
)
from ctxgate_client.models import (
    Acl,
    Budget,
    BundleFile,
    Chunk,
    Constraint,
    DocumentIn,
    Event,
    MemoryIn,
    MemoryScope,
    Message,
    Retrieval,
    ToolCall,
    ToolEffect,
    ToolResult,
    Workspace,
)

__all__ = [
    "Acl",
    "AsyncCtxgateClient",
    "BadRequestError",
    "Budget",
    "BudgetTooSmallError",
    "BundleFile",
    "Chunk",
    "ConflictError",
    "Constraint",
    "CtxgateClient",
    "CtxgateConnectionError",
    "CtxgateError",
    "DocumentIn",
    "Event",
    "ForbiddenError",
    "InvalidRequestError",
    "MemoryIn",
    "MemoryScope",
    "Message",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "Retrieval",
    "RetryPolicy",
    "ServerError",
    "StaleRevisionError",
    "ToolCall",
    "ToolEffect",
    "ToolResult",
    "UnauthorizedError",
    "UnavailableError",
    "Workspace",
]
