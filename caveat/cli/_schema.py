"""``caveat schema ...``: the fact schema and exported JSON schemas."""

from __future__ import annotations

import typer

from caveat.cli._common import app

schema_app = typer.Typer(help="The fact schema and exported JSON schemas.", no_args_is_help=True)
app.add_typer(schema_app, name="schema")
