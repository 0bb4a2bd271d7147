"""Write the HTTP API's OpenAPI document, as ``GET /openapi.json`` serves it, to a file
(or to standard output), for the clients' generated types (``make ts-types``).

The document is read from the application itself over a runtime on no database: no
server, no PostgreSQL and no token are needed, and what is written is what this
checkout's server would serve.

    python clients/openapi.py clients/typescript/build/openapi.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def document() -> dict[str, Any]:
    """The OpenAPI document of ``caveat.api.create_app`` (the routes' schemas only: the
    runtime's engine points at no database and is never connected)."""
    from caveat import app as use
    from caveat import db
    from caveat.api import create_app

    engine = db.make_engine("postgresql+psycopg://openapi@/openapi?host=/nonexistent")
    try:
        return create_app(use.Runtime.over(engine, "openapi")).openapi()
    finally:
        engine.dispose()


def main(argv: list[str]) -> int:
    text = json.dumps(document(), indent=2, ensure_ascii=False) + "\n"
    if not argv or argv[0] == "-":
        sys.stdout.write(text)
        return 0
    target = Path(argv[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
