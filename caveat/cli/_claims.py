"""``caveat write``, ``caveat item show`` and ``caveat skill ...``: items through the gate."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals
from predicates.errors import InputError

if TYPE_CHECKING:
    import claims

skill_app = typer.Typer(help="Skills: release and retire versions.", no_args_is_help=True)
app.add_typer(skill_app, name="skill")
item_app = typer.Typer(help="Stored items.", no_args_is_help=True)

#: ``caveat write`` shows a progress bar (stderr) from this many items on.
BAR_FROM = 1000
app.add_typer(item_app, name="item")


def read_json(path: Path) -> Any:
    """A JSON document from ``path`` (``-``: standard input); ``InputError`` if it is not one."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
        return json.loads(text)
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from exc


def render_batch(result: claims.BatchResult, as_json: bool) -> None:
    """One line per item (or the JSON list); exit 1 when any item was refused."""
    if as_json:
        typer.echo(json.dumps([o.to_dict() for o in result.outcomes]))
    else:
        for o in result.outcomes:
            if o.outcome == "rejected":
                gate = f" at {o.gate}" if o.gate else ""
                typer.echo(f"[{o.index}] rejected{gate}: {o.code}: {o.message}")
            else:
                extra = f", supersedes {o.superseded}" if o.superseded else ""
                typer.echo(f"[{o.index}] {o.outcome}: item {o.item_id} ({o.state}{extra})")
        counts = ", ".join(f"{result.count(k)} {k}" for k in ("accepted", "duplicate", "rejected"))
        typer.echo(counts)
    if result.count("rejected"):
        raise typer.Exit(1)


@app.command("write")
@refusals
def write(
    path: Annotated[
        Path, typer.Argument(help="JSON file of one item or a list of items; - reads stdin.")
    ],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write items through the gate as one batch; one line per item; exit 1 if any is refused."""
    from caveat import app as use
    from caveat.app._input import item_writes
    from caveat.progress import Bar

    data = read_json(path)
    try:
        requests = item_writes(data if isinstance(data, list) else [data])
    except InputError as exc:
        raise InputError(f"{path}: not an item write: {exc.message}", **exc.detail) from exc
    big = len(requests) >= BAR_FROM and not as_json  # a bar where it helps
    with use.serving(tenant, as_) as (rt, actor), Bar("writing", len(requests), big) as bar:
        result = use.write_batch(rt, actor, requests, progress=bar.advance)
    render_batch(result, as_json)


@item_app.command("show")
@refusals
def item_show(
    item_id: Annotated[int, typer.Argument(help="Item id.")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print one item as the acting principal may see it (not_found otherwise)."""
    from caveat import app as use
    from caveat.app.views import item_view

    with use.serving(tenant, as_) as (rt, actor):
        view = item_view(use.item(rt, actor, item_id))
    if as_json:
        typer.echo(view.model_dump_json())
        return
    for key, value in view.model_dump(mode="json").items():
        typer.echo(f"{key:>14}: {_text(value)}")


def _text(value: object) -> str:
    """A field of an item as text: what its JSON says (``null`` as ``-``, a list one
    value after another, a string as it is), never a Python repr."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value) or "-"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


@skill_app.command("release")
@refusals
def skill_release(
    item_id: Annotated[int, typer.Argument(help="The skill version (item id) to release.")],
    test: Annotated[
        str | None,
        typer.Option("--test", help="Evidence id of a passing test run (else the one it cites)."),
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Release a skill version on a passing test; the version released before it retires."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        item = use.release_skill(rt, actor, item_id, test=test)
    if as_json:
        typer.echo(
            json.dumps({"item": item.id, "version": item.version, "test": item.test_evidence})
        )
    else:
        typer.echo(f"skill {item.id} version {item.version} released (test {item.test_evidence})")


@skill_app.command("retire")
@refusals
def skill_retire(
    item_id: Annotated[int, typer.Argument(help="The skill version (item id) to retire.")],
    reason: Annotated[str | None, typer.Option("--reason", help="Why (audited).")] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Retire a skill version: it is no longer recalled."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        item = use.retire_skill(rt, actor, item_id, reason=reason)
    if as_json:
        typer.echo(
            json.dumps({"item": item.id, "version": item.version, "release_state": "retired"})
        )
    else:
        typer.echo(f"skill {item.id} version {item.version} retired")
