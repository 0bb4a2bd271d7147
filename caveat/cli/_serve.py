"""``caveat serve``: the HTTP API and MCP over streamable HTTP (docs/http.md);
``caveat mcp``: MCP on stdio (docs/agents.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from caveat.cli._common import app, refusals


@app.command("serve")
@refusals
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8080,
    every: Annotated[
        float,
        typer.Option(
            "--every",
            help="Seconds between background rounds (embed queue, sweep); due fact "
            "sources are looked for every second (or this, if shorter).",
        ),
    ] = 5.0,
) -> None:
    """Serve the HTTP API and the MCP tools over streamable HTTP at /mcp (bearer API
    tokens; see caveat token create) until interrupted; pulls the fact sources that
    have `every` when due, one puller however many servers share the database."""
    import uvicorn

    from caveat.api import create_app
    from caveat.app import open_runtime

    with open_runtime(embedder="settings") as rt:
        uvicorn.run(create_app(rt, background=every), host=host, port=port, log_level="info")


@app.command("mcp")
@refusals
def mcp_command() -> None:
    """Serve the MCP tools on stdio, acting for the API token in CAVEAT_TOKEN."""
    import os

    from caveat.app import open_runtime
    from caveat.mcpserver import build_server
    from predicates.errors import Unauthenticated

    token = os.environ.get("CAVEAT_TOKEN", "").strip()
    if not token:
        raise Unauthenticated("set CAVEAT_TOKEN to an API token (caveat token create)")
    with open_runtime(embedder="settings") as rt:
        build_server(rt, token).run("stdio")
