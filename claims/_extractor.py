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

__all__ = [
    "REFERENCE_PROMPT",
    "AgentTurn",
    "Extractor",
    "RecordedExtractor",
    "parse_model_output",
    "reference_prompt",
]

#: The reference system prompt of an extractor (docs/proposals.md, "The reference prompt",
#: shows it verbatim; a test keeps them equal). ``{DECLARED_ATTRIBUTES}`` and
#: ``{TURN_EVIDENCE}`` are filled by ``reference_prompt``.
REFERENCE_PROMPT = """\
You extract claims from one turn of an incident-response agent, for a store
that only accepts claims it can check. Answer with JSON only, in the given
schema: {"proposals": [...]}. Propose nothing rather than something vague;
[] is a good answer.

A claim is one observation: SUBJECT had ATTRIBUTE = OBJECT, under
CONDITIONS, shown by EVIDENCE.

Rules:
1. Observations, not advice. Never propose what someone should do. An
   attribute such as fix_*, *_method, *_procedure, how_to_*, should_*,
   must_*, recommended_*, best_*, always_*, never_*, remedy, workaround or
   action, and an object that is an instruction ("restart", "you should
   drain first", "never scale below 3"), will be refused. A procedure that
   was carried out and worked is a skill: kind "skill", the steps as the
   object; never a fact.
2. Conditions are predicates, not prose: `attribute operator value` with
   operators eq ne lt lte gt gte in not_in contains matches exists, values
   such as 20, 0.8, "text", true, 30s, 5m, v15.4, [1, 2]. Use only these
   attributes: {DECLARED_ATTRIBUTES}. Use `@entity:attribute` for another
   entity. Put in `required` what must hold for the observation to apply
   again, and in `excluded` what must not. If you cannot say it as a
   predicate over those attributes, leave it out.
3. Evidence: cite only these ids: {TURN_EVIDENCE}. Every claim cites at
   least one. If the object is the evidence itself (a trace, a graph), put
   its id as the object.
4. epistemic: "observation" only for a value read off the evidence;
   anything inferred ("possibly", "likely", "seems", a cause you reason
   towards) is "hypothesis".
5. Name subjects as the turn names them; do not invent entities.
6. attribute: snake_case, specific (restart_restored_service_at,
   lag_returned_within_s), not generic (status, info).
7. text: one plain sentence a colleague would understand out of context.
8. rationale: one sentence on where in the turn this comes from.
9. Every field is present; use null or [] for none. No other fields.
"""


def reference_prompt(attributes: Sequence[str], evidence: Sequence[str]) -> str:
    """``REFERENCE_PROMPT`` with the tenant's declared attributes and the turn's evidence
    ids written in (``(none)`` for an empty list)."""
    return REFERENCE_PROMPT.replace(
        "{DECLARED_ATTRIBUTES}", ", ".join(attributes) or "(none)"
    ).replace("{TURN_EVIDENCE}", ", ".join(evidence) or "(none)")


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
