"""Database errors as the error tree: the one translation every use case goes through."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg.errors
import sqlalchemy.exc

from caveat.db import DatabaseError
from predicates.errors import CaveatError, Conflict, InputError

__all__ = ["mapped"]

#: SQLSTATEs of a write that lost a race: retrying it may succeed.
_RACES = (
    psycopg.errors.UniqueViolation,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
    psycopg.errors.ExclusionViolation,
)


@contextmanager
def mapped() -> Iterator[None]:
    """Translate what the database raises into the error tree, ``raise ... from``:

    - a lost race (unique violation, serialization failure, deadlock, lock timeout)
      -> ``Conflict`` (it says nothing about rows the caller cannot read);
    - text the database cannot store (a NUL byte, an untranslatable character, a lone
      surrogate that the driver cannot encode as UTF-8) -> ``InputError`` with code
      ``text_invalid``;
    - a value past one of the database's limits (a key too long for its index)
      -> ``InputError`` (``invalid_input``), not an unavailable database;
    - an unmigrated database (a missing table or function) or a lost connection
      -> ``DatabaseError`` (``database_unavailable``).

    ``CaveatError`` passes through unchanged; anything else is a bug and is not hidden."""
    try:
        yield
    except CaveatError:
        raise
    except (sqlalchemy.exc.DBAPIError, psycopg.Error) as exc:
        twin = translate(exc)
        if twin is None:
            raise
        raise twin from exc
    except UnicodeEncodeError as exc:  # the driver encoding a parameter ("\ud800")
        bad = ascii(exc.object[exc.start : exc.end])[:40]
        message = f"text the database cannot store: {exc.reason} {bad} at position {exc.start}"
        raise InputError(message, code="text_invalid") from exc


def translate(exc: sqlalchemy.exc.DBAPIError | psycopg.Error) -> CaveatError | None:
    """The error-tree twin of a database error (``mapped`` says which), or None."""
    orig = exc.orig if isinstance(exc, sqlalchemy.exc.DBAPIError) else exc
    first = (str(orig).strip().splitlines() or ["database error"])[0]
    if isinstance(orig, _RACES):
        return Conflict("a concurrent change took precedence; try again")
    if isinstance(orig, psycopg.errors.UntranslatableCharacter) or (
        isinstance(orig, psycopg.DataError) and "NUL" in first
    ):
        return InputError(f"text the database cannot store: {first}", code="text_invalid")
    if isinstance(orig, psycopg.errors.ProgramLimitExceeded):  # an index row past 8 kB
        return InputError(f"a value too large for the database: {first}")
    if isinstance(orig, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedFunction):
        return DatabaseError(f"{first} (is the database migrated? run `caveat migrate`)")
    if isinstance(orig, psycopg.OperationalError) or isinstance(
        exc, sqlalchemy.exc.OperationalError
    ):
        return DatabaseError(first)
    if isinstance(orig, psycopg.DataError):
        return InputError(f"a value the database refused: {first}")
    return None
