"""Read a format-1 scenario file into a validated, fully resolved ``Scenario``.

Everything wrong with a file (YAML syntax, shape, types, unknown keys, refs,
principals, the clock, contradictory expectations) is one ``ScenarioError``
whose ``str()`` is ``FILE:LINE:COL: reason``, pointing at the offending key
or value. Nothing partial is ever returned. The format is described in
docs/scenarios.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path as FilePath
from typing import Any, TypeVar, cast, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from rapidfuzz import fuzz, process

import claims
from caveat.errors import STATUS
from caveat.replay._models import (
    ACTION_MODELS,
    EXPECT_MODELS,
    WRAPPED_ACTIONS,
    Action,
    ActionName,
    AdvanceArgs,
    AttachEvidenceArgs,
    CheckContextArgs,
    CheckContextExpect,
    CiteArgs,
    DiffArgs,
    DiffExpect,
    EventArgs,
    Expect,
    ExpectStateArgs,
    ItemState,
    PromoteArgs,
    RecallArgs,
    RecallExpect,
    RecallGate,
    RefuteArgs,
    RevokeArgs,
    Scenario,
    ScenarioHeader,
    Step,
    VerifyArgs,
    WriteArgs,
    WriteExpect,
    WriteGate,
)
from caveat.replay._source import Path, Pos, SourceMap, load_yaml, scenario_error
from caveat.replay._source import where as _where
from caveat.replay._time import parse_duration, parse_instant
from predicates.errors import ScenarioError, nul_location

__all__ = ["load_scenario", "parse_scenario"]

_STEP_KEYS = ("at", "as", "expect")
_M = TypeVar("_M", bound=BaseModel)
Problem = tuple[Pos, str]

# Write-gate reason codes by gate, and those raised around the gate, from claims' one
# table (model.md §3.2).
_GATE_CODES: dict[str, frozenset[str]] = {
    gate: frozenset(c for c, g in claims.REASON_GATES.items() if g == gate)
    for gate in ("G1", "G2", "G3", "G4")
}
_UNGATED_CODES = frozenset(c for c, g in claims.REASON_GATES.items() if g is None)
#: The choices a pydantic ``literal_error`` lists (``'a', 'b' or 'c'``).
_QUOTED = re.compile(r"'([^']*)'")


def load_scenario(path: FilePath) -> Scenario:
    """Read and validate the scenario at ``path``; raise ``ScenarioError`` for any problem."""
    filename = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        reason = f"cannot read scenario file: {exc.strerror or exc}"
        raise scenario_error(filename, Pos(1, 1), reason) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        column = len(before) - (before.rfind(b"\n") + 1) + 1
        raise scenario_error(filename, Pos(line, column), "file is not UTF-8 text") from exc
    return parse_scenario(text, filename)


def parse_scenario(text: str, filename: str) -> Scenario:
    """Validate scenario ``text`` (named ``filename`` in errors) into a resolved ``Scenario``.

    Raises ``ScenarioError`` (code ``scenario_invalid``) and nothing else.
    """
    data, source = load_yaml(text, filename)
    return _Parser(filename, source).scenario(data)


class _Parser:
    def __init__(self, filename: str, source: SourceMap) -> None:
        self.filename = filename
        self.source = source

    # --- errors ------------------------------------------------------------

    def problem(self, path: Path, reason: str, *, key: bool = False) -> Problem:
        return self.source.locate(path, prefer_key=key), reason

    def fail(self, path: Path, reason: str, *, key: bool = False) -> ScenarioError:
        return self.raise_first([self.problem(path, reason, key=key)])

    def raise_first(self, problems: list[Problem]) -> ScenarioError:
        pos, reason = min(problems, key=lambda problem: problem[0])
        return scenario_error(self.filename, pos, reason)

    def validate(
        self,
        model: type[_M],
        data: object,
        prefix: Path,
        *,
        wrapper: str | None = None,
        expect_of: str | None = None,
    ) -> tuple[_M | None, list[Problem]]:
        try:
            return model.model_validate(data), []
        except ValidationError as exc:
            return None, [
                self._translate(error, model, prefix, wrapper, expect_of) for error in exc.errors()
            ]

    def _translate(
        self,
        error: ErrorDetails,
        model: type[BaseModel],
        prefix: Path,
        wrapper: str | None,
        expect_of: str | None,
    ) -> Problem:
        model_loc = tuple(error["loc"])
        loc = model_loc[1:] if wrapper is not None and model_loc[:1] == (wrapper,) else model_loc
        kind = error["type"]
        if kind == "missing":
            parent = prefix + loc[:-1]
            return self.problem(
                parent, f"{_where(parent)}: missing required key '{loc[-1]}'", key=True
            )
        if kind == "extra_forbidden":
            path = prefix + loc
            name = str(loc[-1])
            allowed = _allowed_keys(model, model_loc[:-1])
            if expect_of is not None and len(loc) == 1:
                reason = (
                    f"{_where(path[:-1])}: '{name}' is not an expectation of"
                    f" {expect_of} steps; they may expect: {', '.join(allowed)}"
                )
            elif (path[-2:-1], name) in _LIVE_ONLY:
                reason = f"{_where(path[:-1])}: {_LIVE_ONLY[path[-2:-1], name]}"
            else:
                reason = f"{_where(path[:-1])}: unknown key '{name}'" + (
                    _hint(name, allowed) or "; it takes no keys"
                )
            return self.problem(path, reason, key=True)
        if loc and loc[-1] == "[key]":
            path = prefix + loc[:-1]
            reason = f"{_where(path[:-1])}: key {str(path[-1])!r}: {_message(error)}"
            return self.problem(path, reason, key=True)
        path = prefix + loc
        value = error.get("input")
        if kind == "literal_error" and isinstance(value, str):
            choices = _QUOTED.findall(str((error.get("ctx") or {}).get("expected", "")))
            family = _family(choices)
            if family is not None:
                return self.problem(path, f"{_where(path)}: {unknown_name(family, value, choices)}")
        return self.problem(path, f"{_where(path)}: {_message(error)}")

    # --- the document ------------------------------------------------------

    def scenario(self, data: object) -> Scenario:
        if not isinstance(data, dict):
            raise self.fail((), f"a scenario is a YAML mapping of keys, got {_describe(data)}")
        nul = nul_location(data)
        if nul is not None:
            raise self.fail(
                nul, f"{_where(nul)}: holds a NUL byte (\\x00), which caveat cannot store"
            )
        if "caveat_scenario" not in data:
            raise self.fail((), "missing required key 'caveat_scenario' (the format version: 1)")
        version = data["caveat_scenario"]
        if type(version) is not int or version != 1:
            raise self.fail(
                ("caveat_scenario",),
                f"caveat_scenario: unsupported format {version!r}; this caveat reads format 1",
            )
        header, problems = self.validate(ScenarioHeader, data, ())
        if header is None:
            raise self.raise_first(problems)
        self._check_header(header)
        reader = _StepReader(self, header)
        steps = [reader.read(index, raw) for index, raw in enumerate(header.steps)]
        fields: dict[str, object] = {
            info.alias or name: getattr(header, name)
            for name, info in ScenarioHeader.model_fields.items()
        }
        fields["steps"] = steps
        return Scenario.model_validate(fields)

    def _check_header(self, header: ScenarioHeader) -> None:
        problems: list[Problem] = []
        seen_attributes: set[str] = set()
        for index, entry in enumerate(header.schema_):
            if entry.attribute in seen_attributes:
                problems.append(
                    self.problem(
                        ("schema", index, "attribute"),
                        f"schema[{index}].attribute: '{entry.attribute}' is declared twice",
                    )
                )
            seen_attributes.add(entry.attribute)
        ids: set[str] = set()
        for index, entity in enumerate(header.entities):
            if entity.id in ids:
                problems.append(
                    self.problem(
                        ("entities", index, "id"),
                        f"entities[{index}].id: entity '{entity.id}' is declared twice",
                    )
                )
            ids.add(entity.id)
        names = ids | {alias for entity in header.entities for alias in entity.aliases}
        for index, entity in enumerate(header.entities):
            for edge in ("depends_on", "runs_on"):
                for position, target in enumerate(getattr(entity, edge)):
                    if target not in names:
                        path: Path = ("entities", index, edge, position)
                        problems.append(
                            self.problem(
                                path,
                                f"{_where(path)}: '{target}' is not a declared entity"
                                + _hint(target, sorted(ids)),
                            )
                        )
        if problems:
            raise self.raise_first(problems)


class _StepReader:
    """Reads steps in order, carrying the clock and the refs defined so far."""

    def __init__(self, parser: _Parser, header: ScenarioHeader) -> None:
        self.parser = parser
        self.principals = header.principals
        agents = [name for name, p in header.principals.items() if p.role == "agent"]
        self.default_actor = agents[0] if agents else next(iter(header.principals))
        self.clock = header.start
        self.defined: dict[str, int] = {}
        self.later: dict[str, int] = {}
        for index, raw in enumerate(header.steps):
            write = raw.get("write") if isinstance(raw, dict) else None
            ref = write.get("ref") if isinstance(write, dict) else None
            if isinstance(ref, str):
                self.later.setdefault(ref, index)

    def line_of(self, index: int) -> int:
        return self.parser.source.locate(("steps", index)).line

    def read(self, index: int, raw: object) -> Step:
        path: Path = ("steps", index)
        action = self._action_key(path, raw)
        assert isinstance(raw, dict)
        args, expect, at, actor = self._typed(path, action, raw)
        problems = list(self._semantics(path, action, args, expect))
        if problems:
            raise self.parser.raise_first(problems)
        if isinstance(args, WriteArgs):
            self.defined[args.ref] = index
        return Step(
            index=index,
            line=self.line_of(index),
            action=cast(ActionName, action),
            args=cast(Action, args),
            at=at,
            actor=actor,
            expect=expect,
        )

    def _action_key(self, path: Path, raw: object) -> str:
        parser = self.parser
        where = _where(path)
        if not isinstance(raw, dict):
            raise parser.fail(
                path, f"{where}: a step is a mapping with one action key, got {_describe(raw)}"
            )
        actions: list[str] = [key for key in raw if key in ACTION_MODELS]
        unknown: list[str] = [k for k in raw if k not in ACTION_MODELS and k not in _STEP_KEYS]
        if unknown:
            name = unknown[0]
            if actions:
                reason = (
                    f"{where}: unknown key '{name}'; a step has one action key"
                    " and optionally at, as and expect"
                ) + _hint(name, [*_STEP_KEYS, *ACTION_MODELS])
            else:
                reason = f"{where}: unknown action '{name}'" + _hint(name, list(ACTION_MODELS))
            raise parser.fail((*path, name), reason, key=True)
        if not actions:
            raise parser.fail(
                path, f"{where}: a step needs one action key: {', '.join(ACTION_MODELS)}"
            )
        if len(actions) > 1:
            raise parser.fail(
                (*path, actions[1]),
                f"{where}: a step has exactly one action, found {len(actions)}:"
                f" {', '.join(actions)}",
                key=True,
            )
        return actions[0]

    def _typed(
        self, path: Path, action: str, raw: dict[str, Any]
    ) -> tuple[BaseModel, Expect | None, datetime, str]:
        parser = self.parser
        problems: list[Problem] = []
        value = raw[action]
        if action == "audit_verify" and value is None:
            value = {}
        wrapper = WRAPPED_ACTIONS.get(action)
        args, found = parser.validate(
            ACTION_MODELS[action],
            {wrapper: value} if wrapper is not None else value,
            (*path, action),
            wrapper=wrapper,
        )
        problems += found
        expect: Expect | None = None
        if raw.get("expect") is not None:
            expect, found = parser.validate(
                EXPECT_MODELS.get(action, Expect),
                raw["expect"],
                (*path, "expect"),
                expect_of=action,
            )
            problems += found
        at, found = self._resolve_at(path, raw.get("at"))
        problems += found
        actor, found = self._resolve_actor(path, raw.get("as"))
        problems += found
        if isinstance(args, AdvanceArgs) and at is not None:
            try:
                at = at + args.by
            except OverflowError:
                problems.append(
                    parser.problem((*path, action), f"{_where(path)}: the clock runs out of range")
                )
        if problems:
            raise parser.raise_first(problems)
        assert args is not None and at is not None
        self.clock = at
        return args, expect, at, actor

    def _resolve_at(self, path: Path, value: object) -> tuple[datetime | None, list[Problem]]:
        at_path: Path = (*path, "at")
        where = _where(at_path)
        base = self.clock
        if value is None:
            return base, []
        if isinstance(value, str) and value.startswith(("+", "-")):
            if value.startswith("-"):
                return None, [
                    self.parser.problem(
                        at_path, f"{where}: the clock never runs backwards; offsets are +DURATION"
                    )
                ]
            try:
                return base + parse_duration(value[1:]), []
            except (ValueError, OverflowError):
                return None, [
                    self.parser.problem(
                        at_path,
                        f"{where}: {value!r} is not an offset; write + and a whole number"
                        " with a unit s, m, h or d, e.g. +30s, +2h, +12d",
                    )
                ]
        if not isinstance(value, str | datetime):
            return None, [
                self.parser.problem(
                    at_path,
                    f"{where}: expected a UTC time (2026-03-01T09:00:00Z) or an offset"
                    f" (+30s), got {_describe(value)}",
                )
            ]
        try:
            at = parse_instant(value)
        except ValueError as exc:
            return None, [self.parser.problem(at_path, f"{where}: {exc}")]
        if at < base:
            return None, [
                self.parser.problem(
                    at_path,
                    f"{where}: the clock never runs backwards: {_iso(at)} is before"
                    f" the previous step's time {_iso(base)}",
                )
            ]
        return at, []

    def _resolve_actor(self, path: Path, value: object) -> tuple[str, list[Problem]]:
        as_path: Path = (*path, "as")
        if value is None:
            return self.default_actor, []
        if isinstance(value, str) and value in self.principals:
            return value, []
        names = list(self.principals)
        if isinstance(value, str):
            reason = f"{_where(as_path)}: unknown principal '{value}'" + _hint(value, names)
        else:
            reason = f"{_where(as_path)}: expected a principal name, got {_describe(value)}"
        return self.default_actor, [self.parser.problem(as_path, reason)]

    # --- rules across fields and steps ---------------------------------------

    def _semantics(
        self, path: Path, action: str, args: BaseModel, expect: Expect | None
    ) -> Iterator[Problem]:
        at_action: Path = (*path, action)
        at_expect: Path = (*path, "expect")
        for rel, ref, key in _action_refs(args):
            yield from self._check_ref((*at_action, *rel), ref, key, path)
        if isinstance(args, WriteArgs) and args.ref in self.defined:
            first = self.defined[args.ref]
            yield self.parser.problem(
                (*at_action, "ref"),
                f"{_where((*at_action, 'ref'))}: ref '{args.ref}' is already defined"
                f" by the write at line {self.line_of(first)}",
            )
        if (
            isinstance(args, EventArgs)
            and args.principal is not None
            and args.principal not in self.principals
        ):
            names = list(self.principals)
            yield self.parser.problem(
                (*at_action, "principal"),
                f"{_where((*at_action, 'principal'))}: unknown principal '{args.principal}'"
                + _hint(args.principal, names),
            )
        if isinstance(args, DiffArgs):
            yield from self._diff_rules(at_action, args)
        if expect is None:
            return
        for rel, ref, key in _expect_refs(expect):
            yield from self._check_ref((*at_expect, *rel), ref, key, path)
        yield from self._expect_rules(at_expect, args, expect)

    def _check_ref(self, ref_path: Path, ref: str, key: bool, step_path: Path) -> Iterator[Problem]:
        if ref in self.defined:
            return
        where = _where(ref_path[:-1] if key else ref_path)
        later = self.later.get(ref)
        if later == step_path[1]:
            reason = f"{where}: a write cannot name its own ref '{ref}'"
        elif later is not None and later > int(step_path[1]):
            reason = (
                f"{where}: ref '{ref}' is used before the write that defines it"
                f" (line {self.line_of(later)})"
            )
        else:
            reason = f"{where}: unknown ref '{ref}'; refs are defined by earlier write steps"
            reason += _hint(ref, list(self.defined))
        yield self.parser.problem(ref_path, reason, key=key)

    def _expect_rules(self, at_expect: Path, args: BaseModel, expect: Expect) -> Iterator[Problem]:
        parser = self.parser
        for name in ("error", "code"):
            code = getattr(expect, name, None)
            if code is not None and code not in NAME_FAMILIES["code"]:
                at = (*at_expect, name)
                yield parser.problem(at, f"{_where(at)}: {unknown_name('code', code)}")
        named = [
            name
            for name in type(expect).model_fields
            if name != "error" and getattr(expect, name) is not None
        ]
        if expect.error is not None:
            for name in named:
                yield parser.problem(
                    (*at_expect, name),
                    f"{_where(at_expect)}: 'error' says the step fails, so it has no result"
                    f" to check '{name}' against",
                    key=True,
                )
        if isinstance(expect, WriteExpect):
            yield from self._write_rules(at_expect, expect)
        if isinstance(expect, RecallExpect) and isinstance(args, RecallArgs):
            yield from self._recall_rules(at_expect, args, expect)
        if isinstance(expect, CheckContextExpect) and isinstance(args, CheckContextArgs):
            yield from self._context_rules(at_expect, args, expect)
        if isinstance(expect, DiffExpect):
            yield from self._diff_expect_rules(at_expect, expect)

    def _diff_rules(self, at_action: Path, args: DiffArgs) -> Iterator[Problem]:
        now = self.clock  # the step's own time, resolved by now
        bounds = {
            name: now + value if isinstance(value, timedelta) else value
            for name, value in (("from", args.from_), ("to", args.to))
        }
        for name, value in bounds.items():
            if value > now:
                yield self.parser.problem(
                    (*at_action, name),
                    f"{_where((*at_action, name))}: {_iso(value)} is after the step's time"
                    f" {_iso(now)}; a diff cannot see the future",
                )
        if bounds["from"] > bounds["to"]:
            yield self.parser.problem(
                (*at_action, "from"),
                f"{_where((*at_action, 'from'))}: {_iso(bounds['from'])} is after"
                f" to ({_iso(bounds['to'])}); a diff runs forward in time",
            )

    def _diff_expect_rules(self, at_expect: Path, expect: DiffExpect) -> Iterator[Problem]:
        where = _where(at_expect)
        changed: dict[str, str] = {}
        for name in ("became", "stopped"):
            for i, ref in enumerate(getattr(expect, name) or ()):
                if ref in changed and changed[ref] != name:
                    yield self.parser.problem(
                        (*at_expect, name, i),
                        f"{where}: ref '{ref}' cannot be in both '{changed[ref]}' and '{name}'",
                    )
                changed.setdefault(ref, name)
        mentioned = {
            **changed,
            **{ref: "causes" for ref in expect.causes or {} if ref not in changed},
        }
        for i, ref in enumerate(expect.unknown_to_caller or ()):
            if ref in mentioned:
                yield self.parser.problem(
                    (*at_expect, "unknown_to_caller", i),
                    f"{where}: ref '{ref}' cannot be in both '{mentioned[ref]}'"
                    " and 'unknown_to_caller'",
                )

    def _write_rules(self, at_expect: Path, expect: WriteExpect) -> Iterator[Problem]:
        where = _where(at_expect)
        outcome = expect.outcome
        conflicts: list[tuple[str, str]] = []
        if outcome == "accepted":
            conflicts += [(name, "names a rejection") for name in ("code", "gate")]
        if outcome == "duplicate":
            conflicts.append(("gate", "names a rejection"))
            if expect.code not in (None, "duplicate_no_change"):
                conflicts.append(("code", "is not duplicate_no_change"))
        if outcome in ("rejected", "duplicate"):
            conflicts.append(("state", "is the state of a new item"))
        for name, why in conflicts:
            if getattr(expect, name) is not None:
                yield self.parser.problem(
                    (*at_expect, name),
                    f"{where}: '{name}' {why}, but the outcome is {outcome}",
                    key=True,
                )
        gate, code = expect.gate, expect.code
        if gate is not None and code is not None:
            owner = next((g for g, codes in _GATE_CODES.items() if code in codes), None)
            if (owner is not None and owner != gate) or code in _UNGATED_CODES:
                raised_by = f"raised by {owner}" if owner else "raised outside the four gates"
                yield self.parser.problem(
                    (*at_expect, "gate"), f"{where}: code {code} is {raised_by}, not {gate}"
                )

    def _recall_rules(
        self, at_expect: Path, args: RecallArgs, expect: RecallExpect
    ) -> Iterator[Problem]:
        parser = self.parser
        where = _where(at_expect)
        if expect.withheld is not None and not args.explain:
            yield parser.problem(
                (*at_expect, "withheld"),
                f"{where}: 'withheld' needs explain: true on the recall",
                key=True,
            )
        if expect.count is not None and args.limit is not None and expect.count > args.limit:
            yield parser.problem(
                (*at_expect, "count"),
                f"{where}.count: {expect.count} items can never come back"
                f" from a recall with limit {args.limit}",
            )
        if args.budget is None:
            names = ("packed_include", "packed_exclude", "packed_within_budget", "packed_first")
            for name in names:
                if getattr(expect, name) is not None:
                    yield parser.problem(
                        (*at_expect, name),
                        f"{where}: '{name}' needs budget: TOKENS on the recall",
                        key=True,
                    )
        if expect.knowledge_include and "knowledge" not in (args.sources or ["memory"]):
            yield parser.problem(
                (*at_expect, "knowledge_include"),
                f"{where}: 'knowledge_include' needs sources with knowledge on the recall",
                key=True,
            )
        wanted_docs = set(expect.knowledge_include or ())
        for i, doc in enumerate(expect.knowledge_exclude or ()):
            if doc in wanted_docs:
                yield parser.problem(
                    (*at_expect, "knowledge_exclude", i),
                    f"{where}: document '{doc}' cannot be in both 'knowledge_include' and "
                    "'knowledge_exclude'",
                )
        packed = set(expect.packed_include or ())
        for i, ref in enumerate(expect.packed_exclude or ()):
            if ref in packed:
                yield parser.problem(
                    (*at_expect, "packed_exclude", i),
                    f"{where}: ref '{ref}' cannot be in both 'packed_include' and 'packed_exclude'",
                )
        present: dict[str, str] = {}
        for name in ("include", "order", "packed_include"):
            present.update((ref, name) for ref in getattr(expect, name) or ())
        hidden = set(expect.unknown_to_caller or ())
        absent: list[tuple[str, Path, str, bool]] = []
        for name in ("exclude", "unknown_to_caller"):
            refs = getattr(expect, name) or ()
            absent += [(name, (name, i), ref, False) for i, ref in enumerate(refs)]
        absent += [("withheld", ("withheld", ref), ref, True) for ref in expect.withheld or {}]
        for name, rel, ref, key in absent:
            clash = present.get(ref)
            if clash is None and name == "withheld" and ref in hidden:
                clash = "unknown_to_caller"
            if clash is not None:
                yield parser.problem(
                    (*at_expect, *rel),
                    f"{where}: ref '{ref}' cannot be in both '{clash}' and '{name}'",
                    key=key,
                )

    def _context_rules(
        self, at_expect: Path, args: CheckContextArgs, expect: CheckContextExpect
    ) -> Iterator[Problem]:
        where = _where(at_expect)
        usable = set(expect.usable or ())
        for name in ("usable", "dropped"):
            for i, ref in enumerate(getattr(expect, name) or ()):
                if ref not in args.items:
                    yield self.parser.problem(
                        (*at_expect, name, i),
                        f"{where}.{name}: '{ref}' is not among the items checked",
                    )
                elif name == "dropped" and ref in usable:
                    yield self.parser.problem(
                        (*at_expect, name, i),
                        f"{where}: '{ref}' cannot be both usable and dropped",
                    )
        for ref in expect.reasons or {}:
            if ref not in args.items:
                yield self.parser.problem(
                    (*at_expect, "reasons", ref),
                    f"{where}.reasons: '{ref}' is not among the items checked",
                    key=True,
                )
            elif ref in usable:
                yield self.parser.problem(
                    (*at_expect, "reasons", ref),
                    f"{where}: '{ref}' cannot be both usable and dropped for a reason",
                    key=True,
                )


# --- helpers -----------------------------------------------------------------


def _action_refs(args: BaseModel) -> Iterable[tuple[Path, str, bool]]:
    """Each ref an action names: path relative to the action, the ref, is it a key."""
    if isinstance(
        args, CiteArgs | VerifyArgs | RefuteArgs | PromoteArgs | RevokeArgs | AttachEvidenceArgs
    ):
        return [(("item",), args.item, False)]
    if isinstance(args, CheckContextArgs):
        return [(("items", i), ref, False) for i, ref in enumerate(args.items)]
    if isinstance(args, ExpectStateArgs):
        return [((ref,), ref, True) for ref in args.states]
    if isinstance(args, WriteArgs):
        return [(("derived_from", i), ref, False) for i, ref in enumerate(args.derived_from)]
    if isinstance(args, RecallArgs):
        return [(("pinned", i), ref, False) for i, ref in enumerate(args.pinned)]
    return []


def _expect_refs(expect: Expect) -> Iterable[tuple[Path, str, bool]]:
    """Each ref an expectation names: path relative to ``expect``, the ref, is it a key."""
    found: list[tuple[Path, str, bool]] = []
    lists: tuple[str, ...] = ()
    if isinstance(expect, RecallExpect):
        lists = (
            "include",
            "exclude",
            "order",
            "unknown_to_caller",
            "packed_include",
            "packed_exclude",
        )
        found += [(("withheld", ref), ref, True) for ref in expect.withheld or {}]
    elif isinstance(expect, CheckContextExpect):
        lists = ("usable", "dropped")
        found += [(("reasons", ref), ref, True) for ref in expect.reasons or {}]
    elif isinstance(expect, DiffExpect):
        lists = ("became", "stopped", "unknown_to_caller")
        found += [(("causes", ref), ref, True) for ref in expect.causes or {}]
    for name in lists:
        found += [((name, i), ref, False) for i, ref in enumerate(getattr(expect, name) or ())]
    return found


#: Keys the doors take that a scenario may not: replay runs on a virtual clock against
#: its own database, so it cannot reach live systems (a recall's ``refresh`` pulls from
#: the team's Prometheus); by (parent key, key), the message that says so.
_REPLAY_REFRESH = (
    "replay cannot reach live systems: 'refresh' pulls from the fact sources, which a "
    "scenario does not have; give the values with an observe step or the recall's "
    "observations"
)
_LIVE_ONLY: dict[tuple[tuple[object, ...], str], str] = {
    (("recall",), "refresh"): _REPLAY_REFRESH,
    (("recall",), "refresh_deadline_ms"): _REPLAY_REFRESH,
}

#: Longer names get no suggestion (fuzzy ranking is quadratic in the length).
_SUGGEST_MAX = 200


def _hint(name: str, choices: Sequence[str]) -> str:
    """``; did you mean 'X'?`` with the closest of ``choices`` (rapidfuzz, as the alias
    resolver suggests; plain ``ratio``, whose 60 keeps ``x`` from suggesting a long name
    that merely contains it), else ``; expected one of: ...``."""
    best = (
        process.extractOne(name, list(choices), scorer=fuzz.ratio, score_cutoff=60)
        if len(name) <= _SUGGEST_MAX
        else None
    )
    if best is not None:
        return f"; did you mean '{best[0]}'?"
    return f"; expected one of: {', '.join(choices)}" if choices else ""


#: The names a scenario spells from a closed set, by family (model.md §8 and §3.2 for
#: the codes): a misspelt one is ``unknown FAMILY 'x'; did you mean 'y'?``.
NAME_FAMILIES: dict[str, frozenset[str]] = {
    "state": frozenset(get_args(ItemState)),
    "gate": frozenset(get_args(RecallGate)) | frozenset(get_args(WriteGate)),
    "code": frozenset(STATUS),
}


def unknown_name(family: str, name: str, choices: Iterable[str] | None = None) -> str:
    """``unknown state 'need_reverification'; did you mean 'needs_reverification'?``:
    ``name`` is not among ``choices`` (default: every name of ``family``)."""
    allowed = sorted(NAME_FAMILIES[family]) if choices is None else list(choices)
    return f"unknown {family} '{name}'" + _hint(name, allowed)


def _family(choices: Iterable[str]) -> str | None:
    """The family a closed set of names belongs to, if any."""
    wanted = set(choices)
    return next((f for f, names in NAME_FAMILIES.items() if wanted <= names), None)


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{type(value).__name__} {shown}"


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


_TYPE_MESSAGES = {
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "dict_type": "expected a mapping",
    "list_type": "expected a list",
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "float_type": "expected a number",
    "bool_type": "expected true or false",
    "string_too_short": "must not be empty",
    "too_short": "must not be empty",
}
_PATTERN_MESSAGES = {
    "^[a-z]": "expected a code such as condition_unparsable",
    "^(?:[A-Za-z0-9_-]+": "expected a dotted attribute name such as config.connection_pool.max",
    "^(?:int|": "expected a type: int, float, bool, string, version, duration, timestamp"
    " or enum[a,b,...]",
}
_SHOW_INPUT = ("_type", "literal_error", "string_pattern_mismatch", "greater_than", "less_than")


def _message(error: ErrorDetails) -> str:
    kind = str(error["type"])
    message = str(error["msg"])
    if kind in _TYPE_MESSAGES:
        text = _TYPE_MESSAGES[kind]
    elif kind == "string_pattern_mismatch":
        pattern = str((error.get("ctx") or {}).get("pattern", ""))
        text = next((m for p, m in _PATTERN_MESSAGES.items() if pattern.startswith(p)), message)
    elif kind == "value_error":
        text = message.removeprefix("Value error, ")
    elif message.startswith("Input should be "):
        text = "expected " + message.removeprefix("Input should be ")
    else:
        text = message[:1].lower() + message[1:]
    if any(kind.endswith(s) or kind.startswith(s) for s in _SHOW_INPUT):
        text += f", got {_describe(error.get('input'))}"
    return text


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the mapping at ``loc`` (relative to ``model``) may hold."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = next(
                (info for name, info in current.model_fields.items() if part in (name, info.alias)),
                None,
            )
            if field is None:
                return []
            current = field.annotation
        elif get_origin(current) in (list, tuple):
            current = get_args(current)[0]
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [info.alias or name for name, info in current.model_fields.items()]
    return []


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated`` and ``X | None`` down to the type that holds keys."""
    for _ in range(10):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        origin = get_origin(annotation)
        if origin is None or origin in (list, tuple, dict):
            return annotation
        if not args:
            return annotation
        annotation = args[0]
    return annotation
