#!/usr/bin/env python3
"""CI's check of what the project keeps in step with ../shared (CI runs with it beside).

1. Every ../shared/scenarios/*.yaml is in scenarios/ under its name, byte for byte.
2. The project's corpus, bench/data/incidents.jsonl, is written in its own words: no
   summary shares a run of RUN words with the summary of the same id in
   ../shared/data/postmortems.jsonl (facts carry over; sentences do not).

``python3 .ci/check_shared.py [--root DIR] [--shared DIR]`` (defaults: the project and
the ``shared`` beside it). Exits 0 when both hold, 1 with one line per difference.
Standard library only: it runs before ``make test`` builds the virtualenv.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

#: The longest run of words a summary may share with the public one (lists of names,
#: such as a product's or carriers', run to six).
RUN = 7
_WORD = re.compile(r"[^\W_]+")


def scenarios(root: Path, shared: Path) -> list[str]:
    """The differences between ../shared/scenarios and scenarios/."""
    theirs = sorted((shared / "scenarios").glob("*.yaml"))
    if not theirs:
        return [f"{shared / 'scenarios'}: no scenarios to compare (is ../shared beside it?)"]
    problems = []
    for f in theirs:
        ours = root / "scenarios" / f.name
        if not ours.is_file():
            problems.append(f"scenarios/{f.name} is missing (it is in {f})")
        elif ours.read_bytes() != f.read_bytes():
            problems.append(f"scenarios/{f.name} differs from {f}: copy it unchanged")
    return problems


def _runs(text: str, n: int) -> set[tuple[str, ...]]:
    words = [w.lower() for w in _WORD.findall(text)]
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def corpus(root: Path, shared: Path) -> list[str]:
    """The project's summaries that copy RUN words running of the shared one's."""
    theirs_path = shared / "data" / "postmortems.jsonl"
    if not theirs_path.is_file():
        return [f"{theirs_path}: not there to compare bench/data/incidents.jsonl with"]
    theirs = {}
    for line in theirs_path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            theirs[row["id"]] = row["summary"]
    problems = []
    ours = root / "bench" / "data" / "incidents.jsonl"
    for n, line in enumerate(ours.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        copied = _runs(row["summary"], RUN) & _runs(theirs.get(row["id"], ""), RUN)
        if copied:
            run = " ".join(sorted(copied)[0])
            problems.append(
                f"bench/data/incidents.jsonl:{n}: {row['id']} copies {RUN} words running "
                f"of the shared summary ('{run}'): write it in the project's words"
            )
    return problems


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(prog="check_shared")
    parser.add_argument("--root", type=Path, default=here)
    parser.add_argument("--shared", type=Path, default=here.parent / "shared")
    args = parser.parse_args(argv)
    problems = scenarios(args.root, args.shared) + corpus(args.root, args.shared)
    for p in problems:
        print(f"check_shared: {p}", file=sys.stderr)
    if not problems:
        print(
            "check_shared: scenarios/ holds ../shared/scenarios unchanged; the corpus is "
            "the project's own words"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
