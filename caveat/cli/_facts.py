"""``caveat facts import``: configuration documents, Prometheus expositions, CloudEvents.

Also the helpers the factgen commands share: reading an input file (``-`` is
standard input) and rendering typed values and ages for a person.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals
from predicates import typed_literal
from predicates.errors import InputError

facts_app = typer.Typer(help="Typed facts: import them from real inputs.", no_args_is_help=True)
app.add_typer(facts_app, name="facts")


def read_input(name: str) -> tuple[str, str]:
    """``(text, source name)`` of a file, or of standard input for ``-``; ``InputError`` if not."""
    if name == "-":
        return sys.stdin.read(), "<stdin>"
    path = Path(name)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file", path=name) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text ({exc.reason})", path=name) from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror})", path=name) from None


def show_age(age: timedelta) -> str:
    """``3m12s``, ``2h``, ``5d3h``: the two largest units, or ``0s`` (negative: in the future)."""
    if age < timedelta(0):
        return f"{show_age(-age)} in the future"
    seconds = int(age.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts[:2]) or "0s"


class Format(StrEnum):
    """What ``caveat facts import`` reads."""

    config = "config"
    prometheus = "prometheus"
    cloudevents = "cloudevents"


@facts_app.command("import")
@refusals
def facts_import(
    file: Annotated[str, typer.Argument(help="Input file, or - for standard input.")],
    fmt: Annotated[Format, typer.Option("--format", help="What the file holds.")],
    subject: Annotated[
        str | None,
        typer.Option(
            "--subject",
            help="Entity the facts are about (config: required; prometheus, cloudevents: "
            "the default for rules or events that name none).",
        ),
    ] = None,
    prefix: Annotated[
        str, typer.Option("--prefix", help="Attribute prefix of a config document.")
    ] = "config.",
    mapping: Annotated[
        Path | None,
        typer.Option("--mapping", help="Prometheus mapping file (YAML): metric -> attribute."),
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import typed facts (or events) from a file; one bad value stores nothing (exit 2)."""
    import factgen
    from caveat import app as use
    from caveat.cli._incident import render_events

    if fmt is Format.config and subject is None:
        raise InputError("--format config needs --subject: the entity the document describes")
    if fmt is Format.prometheus and mapping is None:
        raise InputError("--format prometheus needs --mapping FILE (metric -> attribute rules)")
    if fmt is not Format.prometheus and mapping is not None:
        raise InputError("--mapping only applies to --format prometheus")
    if fmt is not Format.config and prefix != "config.":
        raise InputError("--prefix only applies to --format config")
    text, source_name = read_input(file)
    rules = None
    if mapping is not None:
        mapping_text, mapping_name = read_input(str(mapping))
        rules = factgen.load_prometheus_mapping(mapping_text, source=mapping_name)
    with use.serving(tenant, as_) as (rt, actor):
        tenant = rt.tenant
        done = use.import_facts(
            rt,
            actor,
            format=fmt.value,
            text=text,
            source_name=source_name,
            subject=subject,
            prefix=prefix,
            rules=rules,
        )
    result = done.result
    if as_json:
        from caveat.app.views import event_view

        typer.echo(json.dumps({"tenant": tenant, "format": fmt.value, **event_view(done)}))
        return
    if fmt is Format.cloudevents:
        from caveat.app.views import event_view

        typer.echo(f"recorded {len(result.events)} events in tenant {tenant}")
        render_events(event_view(done))
    else:
        typer.echo(f"stored {len(result.facts)} facts in tenant {tenant}")
        for f in result.facts:
            typer.echo(f"  {f.subject:<20} {f.attribute:<40} {typed_literal(f.value)}")
    if result.skipped:
        typer.echo(f"skipped {len(result.skipped)}:")
        for skipped in result.skipped[:50]:
            where = f" (line {skipped.line})" if skipped.line is not None else ""
            typer.echo(f"  {skipped.key}: {skipped.reason}{where}")
        if len(result.skipped) > 50:
            typer.echo(f"  ... and {len(result.skipped) - 50} more (--json lists them all)")
