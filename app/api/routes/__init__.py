"""The HTTP routes, one module a resource; ``ROUTERS`` is every router the app mounts."""

from app.api.routes import (
    admin,
    bundles,
    context,
    erasures,
    explain,
    health,
    knowledge,
    manifests,
    memories,
    replays,
    sessions,
    tasks,
)

# explain before manifests: the manifest route's ``{turn_id:path}`` would match its paths.
ROUTERS = tuple(m.router for m in (context, sessions, tasks, knowledge, memories, bundles,
                                   explain, manifests, replays, erasures, admin,
                                   health))
