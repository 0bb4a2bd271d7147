"""Extractors: an agent turn in, proposals out (model §3.3).

Any LLM client implements ``Extractor``: send the reference prompt
(docs/proposals.md) and the turn, ask for output in
``proposal_json_schema()``, hand back what the model said. Whatever comes
back is only a proposal: ``consolidate`` validates each one on its own and
the write gate decides. ``RecordedExtractor`` replays recorded model output;
tests use it, never a live model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from claims._consolidate import Proposal
from predicates.errors import InputError, NotFound

__all__ = ["AgentTurn", "Extractor", "RecordedExtractor", "parse_model_output"]


@dataclass(frozen=True)
class AgentTurn:
    """One turn of an agent's run: what it saw and did, and what it may cite.

    ``evidence`` lists the evidence ids registered for this turn (a proposal
    may cite only these or older ones); ``subjects`` the entities in play.
    """

    id: str
    text: str
    case_id: str | None = None
    evidence: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()


@runtime_checkable
class Extractor(Protocol):
    """Turns an agent turn into proposals (validated later, one by one)."""

    def extract(self, turn: AgentTurn) -> Sequence[Proposal | Mapping[str, Any]]:
        """Proposals for ``turn``: ``Proposal`` objects or raw JSON objects."""
        ...


def parse_model_output(text: str) -> list[Any]:
    """The proposals in a model's JSON answer (``{"proposals": [...]}``), unvalidated.

    Raises ``InputError`` when the answer is not that JSON shape at all; a
    malformed proposal inside it is left for ``consolidate`` to refuse.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"model output is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("proposals"), list):
        raise InputError('model output must be an object {"proposals": [...]}')
    return list(data["proposals"])


class RecordedExtractor:
    """Replays recorded model answers, by turn id."""

    def __init__(self, answers: Mapping[str, str]) -> None:
        self._answers = dict(answers)

    @classmethod
    def from_file(cls, path: Path) -> RecordedExtractor:
        """Load ``{"turns": [{"turn": {"id": ...}, "answer": {...}}]}`` (answers as JSON)."""
        try:
            data = json.loads(path.read_text())
            return cls({t["turn"]["id"]: json.dumps(t["answer"]) for t in data["turns"]})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path}: not a recording of model answers ({exc})") from exc

    def extract(self, turn: AgentTurn) -> list[Any]:
        """The recorded answer for ``turn.id``; ``NotFound`` when none was recorded."""
        answer = self._answers.get(turn.id)
        if answer is None:
            raise NotFound(f"no recorded answer for turn {turn.id!r}", turn=turn.id)
        return parse_model_output(answer)
