"""What every command shares: the app, common options, and error rendering.

Conventions every command keeps: commands that touch data take ``--tenant``
(default ``CAVEAT_TENANT``, else ``default``) and act as the local admin
principal unless ``--as`` names another; exit 0 on success, 1 on a domain
refusal, 2 on a usage or input error; never a traceback for bad input.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import psycopg.errors
import sqlalchemy.exc
import typer
from pydantic import ValidationError

from caveat import db
from caveat.app._input import first_error, instant
from predicates.errors import CaveatError, InputError

__all__ = ["AsOpt", "JsonOpt", "TenantOpt", "app", "fail", "instant", "refusals"]

app = typer.Typer(
    help="caveat: a predicate-gated claim store for incident-response agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])

TenantOpt = Annotated[
    str | None, typer.Option("--tenant", help="Tenant (default: CAVEAT_TENANT, else 'default').")
]
AsOpt = Annotated[
    str | None, typer.Option("--as", help="Act as this principal (default: the local admin).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a machine-readable result.")]


def fail(exc: CaveatError, as_json: bool = False) -> None:
    """One line (or the JSON error) and the exit status of the code (``caveat.errors``)."""
    from caveat.errors import status_of

    status = status_of(exc).exit or 1
    if as_json:
        typer.echo(json.dumps({"error": exc.to_dict()}, default=str))
    else:
        typer.echo(f"caveat: {exc.code}: {exc}", err=True)
    raise typer.Exit(status)


def refusals(func: F) -> F:
    """Turn the error tree into one line on stderr and exit 1 (refusal) or 2 (bad input)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except CaveatError as exc:
            fail(exc, bool(kwargs.get("as_json")))
        except ValidationError as exc:  # a request model refused an option's value
            fail(InputError(first_error(exc.errors())), bool(kwargs.get("as_json")))
        except sqlalchemy.exc.ProgrammingError as exc:
            if not isinstance(
                exc.orig, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedFunction
            ):
                raise  # a bug, not an unmigrated database: not dressed up as one
            hint = " (is the database migrated? run `caveat migrate`)"
            fail(db.DatabaseError(f"{exc.orig}".strip() + hint), bool(kwargs.get("as_json")))
        except sqlalchemy.exc.OperationalError as exc:
            fail(db.DatabaseError(f"{exc.orig}".strip()), bool(kwargs.get("as_json")))

    return wrapper  # type: ignore[return-value]
