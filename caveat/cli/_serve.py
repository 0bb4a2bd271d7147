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
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Server processes on the one port (default: the machine's cores); each "
            "has its own runtime, /metrics sums them all.",
        ),
    ] = None,
) -> None:
    """Serve the HTTP API and the MCP tools over streamable HTTP at /mcp (bearer API
    tokens; see caveat token create) until interrupted; pulls the fact sources that
    have `every` when due, one puller however many servers share the database. With
    more than one worker (docs/scaling.md, "Workers"), each is a process of its own;
    on SIGINT or SIGTERM requests in flight finish first (up to 30 s)."""
    import os

    import uvicorn

    from caveat.api import create_app
    from caveat.api._workers import GRACE, serve_workers
    from caveat.app import open_runtime

    count = workers if workers is not None else (os.cpu_count() or 1)
    with open_runtime(embedder="settings") as rt:
        if count == 1:
            uvicorn.run(
                create_app(rt, background=every),
                host=host,
                port=port,
                log_level="info",
                timeout_graceful_shutdown=GRACE,
            )
            return

        # the parent holds the database (an embedded one stays up while it runs), and
        # the embedder's files are made once here, not by every worker at once
        if rt.embedder is not None:
            rt.embedder.embed(["warm up"])
        serve_workers(
            url=rt.server_url,
            settings=rt.settings,
            host=host,
            port=port,
            workers=count,
            every=every,
        )


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
