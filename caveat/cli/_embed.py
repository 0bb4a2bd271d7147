"""``caveat embed``: drain the embedding queue (the dense channel's vectors)."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer

from caveat.app import open_runtime
from caveat.cli._common import JsonOpt, TenantOpt, app, refusals
from caveat.progress import Bar
from recall import enqueue_missing

__all__: list[str] = []


@app.command("embed")
@refusals
def embed(
    tenant: TenantOpt = None,
    batch: Annotated[
        int, typer.Option("--batch", min=1, max=10_000, help="Items embedded per transaction.")
    ] = 256,
    backfill: Annotated[
        bool,
        typer.Option(
            "--backfill",
            help="First queue every current item without a vector under this model "
            "(after changing CAVEAT_EMBEDDER).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Embed the items waiting in the queue, then the knowledge passages without a
    vector (docs/knowledge.md), in batches, with a progress bar.

    Writes commit without waiting for their vectors; until an item is embedded,
    recall ranks it by its other channels and says how many such candidates it
    met. CAVEAT_EMBEDDER=none leaves the queue as it is.
    """
    with open_runtime(tenant=tenant) as rt:
        if rt.embedder is None:
            message = "no embedder (CAVEAT_EMBEDDER=none): the queue is left as it is"
            typer.echo(json.dumps({"embedded": 0, "model": None}) if as_json else message)
            return
        queued = 0
        if backfill:
            with rt.sessions.begin() as s:
                queued = enqueue_missing(session=s, tenant=rt.tenant, model=rt.embedder.name)
        depth = rt.queue_depth()
        started = time.perf_counter()
        if as_json or depth == 0:
            done = rt.embed_pending(batch=batch)
        else:
            with Bar(f"embedding ({rt.embedder.name})", depth) as bar:
                done = rt.embed_pending(batch=batch, progress=bar.advance)
        seconds = time.perf_counter() - started
        result = {
            "model": rt.embedder.name,
            "queued_by_backfill": queued,
            "embedded": done,
            "seconds": round(seconds, 3),
            "items_per_second": round(done / seconds, 1) if done and seconds > 0 else None,
            "left": rt.queue_depth(),
        }
        if as_json:
            typer.echo(json.dumps(result))
        else:
            typer.echo(
                f"embedded {done} item(s) and passage(s) with {rt.embedder.name} in "
                f"{seconds:.1f} s; "
                f"{result['left']} left in the queue"
            )
