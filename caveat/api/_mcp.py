"""The MCP tools over the streamable-HTTP transport, inside ``caveat serve`` at ``/mcp``.

One ``MCPServer`` (``caveat.mcpserver.build_server`` without a token) serves every
tenant: each tool call acts for the bearer token of the HTTP request that carries it,
authenticated again at the call. In front of the SDK's transport, every request must
carry a token the store knows (``401`` problem details otherwise, as the rest of the
API answers), so nothing of the protocol is answered to a caller without one.

The transport is stateless and answers JSON (no session to resume, no server-sent
stream): each request stands alone, like the API's routes, and any process of a
``caveat serve`` fleet may answer it. The SDK's DNS-rebinding guard (a ``Host`` check
meant for unauthenticated local servers) is off: a bearer token, not the network
position, is what admits a request here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from caveat import app as use
from caveat.errors import status_of
from caveat.mcpserver import bearer, build_server
from predicates.errors import CaveatError

__all__ = ["McpDoor"]

#: Builds the problem-details response for (status, code, detail).
Refuse = Callable[[int, str, str], Any]


class McpDoor:
    """An ASGI app: the bearer token checked, then the SDK's streamable-HTTP transport.

    ``running()`` is the SDK's session manager lifetime: enter it in the app's
    lifespan. ``refuse`` renders a refusal (the API's problem details); ``refused``
    counts it by code; ``touch`` is told the tenant of every admitted request.
    """

    def __init__(
        self,
        runtime: use.Runtime,
        *,
        refuse: Refuse,
        refused: Callable[[str], None],
        touch: Callable[[str], None],
    ) -> None:
        self.runtime = runtime
        self._refuse = refuse
        self._refused = refused
        self._touch = touch
        server = build_server(runtime)
        # the SDK's own app is not mounted (its route would answer without a token);
        # building it makes the session manager this door hands requests to
        server.streamable_http_app(
            json_response=True,
            stateless_http=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager: StreamableHTTPSessionManager = server.session_manager

    def running(self) -> Any:
        """The transport's lifetime (an async context manager; once per app)."""
        return self.manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            token = bearer(Request(scope).headers.get("authorization"))
            rt, _ = await anyio.to_thread.run_sync(use.authenticate, self.runtime, token)
        except CaveatError as exc:
            self._refused(exc.code)
            await self._refuse(status_of(exc).http, exc.code, exc.message)(scope, receive, send)
            return
        self._touch(rt.tenant)
        await self.manager.handle_request(scope, receive, send)
