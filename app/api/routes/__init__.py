"""The HTTP routes, one module a resource; ``ROUTERS`` is every router the app mounts."""

from app.api.routes import (
    admin,
    bundles,
    context,
    erasures,
    health,
    knowledge,
    manifests,
    memories,
    sessions,
    tasks,
)

ROUTERS = tuple(m.router for m in (context, sessions, tasks, knowledge, memories, bundles,
                                   manifests, erasures, admin, health))
