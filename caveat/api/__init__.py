"""The HTTP API (FastAPI): a door that validates, calls ``caveat.app`` and renders.

``create_app(runtime)`` builds the application over a process-lifetime runtime
(``caveat.app.Runtime``: one engine logged in as ``caveat_app``). Every route
but ``/healthz`` takes a bearer API token (``caveat token create``); the token
names its tenant, and the route acts for the token's principal with its stored
role and capabilities. Errors are problem details (RFC 9457) carrying the
stable ``code``, with the HTTP status of ``caveat.errors.STATUS``. Recall is a
GET and a pure read; recording its use is a separate POST. The MCP tools are
mounted at ``/mcp`` (the streamable-HTTP transport, behind the same tokens; not
part of the OpenAPI document). See docs/http.md.
"""

from __future__ import annotations

from caveat.api._app import create_app

__all__ = ["create_app"]
