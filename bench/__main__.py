"""``python -m bench NAME [ARGS...]``: run the benchmark module ``bench.bench_NAME``."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def _names() -> list[str]:
    here = Path(__file__).parent
    return sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules([str(here)])
        if m.name.startswith("bench_")
    )


def main(argv: list[str]) -> int:
    """Dispatch to one benchmark by name; with no name, list them."""
    if not argv or argv[0] not in _names():
        print("usage: python -m bench NAME [ARGS...]; NAME is one of: " + ", ".join(_names()))
        return 0 if not argv else 2
    module = importlib.import_module(f"bench.bench_{argv[0]}")
    result: int = module.main(argv[1:])
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
