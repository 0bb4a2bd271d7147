"""What a writer asks for: the strict shape of a write (``ItemWrite``) and its anchors."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

__all__ = ["ANCHOR_FORM", "Anchor", "ItemWrite", "Kind", "error_path", "split_anchor"]

Kind = Literal["episode", "fact", "skill"]

#: A purpose of use, e.g. ``incident_diagnosis``: folded to lower case.
Purpose = Annotated[
    str,
    BeforeValidator(lambda v: v.strip().lower() if isinstance(v, str) else v),
    StringConstraints(pattern=r"^[a-z][a-z0-9_.-]*$"),
]
NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]

#: How deep an item's ``object`` may nest lists and mappings.
MAX_OBJECT_DEPTH = 64
_PLAIN = (str, int, float, bool, type(None), datetime, date)
#: Python writes no int of more than 4,300 digits as text (JSON's form): 14,000 bits.
_MAX_INT_BITS = 14_000


def _plain_depth(value: object) -> int:
    """How deep ``value`` nests lists and mappings (a scalar: 0), counted without
    recursion and stopping past ``MAX_OBJECT_DEPTH``; ``ValueError`` for a value that is
    not plain data (JSON's, or a timestamp): bytes, say, which no door can carry, or an
    int too long to be written as JSON."""
    deepest, level = 0, [value]
    while level and deepest <= MAX_OBJECT_DEPTH:
        below: list[object] = []
        for node in level:
            if isinstance(node, dict):
                if not all(isinstance(k, str) for k in node):
                    raise ValueError("object mappings have string keys")
                below.extend(node.values())
            elif isinstance(node, list | tuple):
                below.extend(node)
            elif not isinstance(node, _PLAIN):
                raise ValueError(f"object holds a {type(node).__name__}, not plain data")
            elif isinstance(node, int) and node.bit_length() > _MAX_INT_BITS:
                raise ValueError("object holds an integer too long to write as text")
        if below:
            deepest += 1
        level = below
    return deepest


#: The steps pydantic adds to a location for a member of a union or a wrapped
#: validator (``str``, ``constrained-str``, ``function-after[...]``): not a field.
_UNION_TAG = re.compile(
    r"^(str|int|float|bool|bytes|none|[a-z]+(-[a-z]+)+|[a-z][a-z-]*\[.*\]|[A-Z][A-Za-z0-9]*)$"
)


def error_path(loc: Sequence[int | str]) -> str:
    """A pydantic error's location as a path: names dotted, list indexes in brackets
    (``items[3].scope``, ``proposals[1].kind``, ``query.limit``). The elements of a
    request body that is a list are the batch's items: ``("body", 3, "scope")`` is
    ``items[3].scope``; a body that is an object names its fields alone
    (``("body", "proposals", 1)`` is ``proposals[1]``); the steps pydantic adds for a
    union's member (``.str``, ``.constrained-str``, a model's name: ``.AnchorObject``,
    ``list[CloudEventIn]``) are left out."""
    parts = list(loc)
    if len(parts) >= 2 and parts[0] == "body":
        parts = parts[1:]
    parts = [p for p in parts if isinstance(p, int) or not _UNION_TAG.match(p)]
    if parts and isinstance(parts[0], int):
        parts = ["items", *parts]
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else str(p)
    return out


#: What a scope or a facet is written as, in every refusal that names one.
ANCHOR_FORM = 'expected "axis:id" (e.g. "case:INC-902")'
_ANCHOR_PATTERN = r"^[^:]+:.+$"


def split_anchor(text: str) -> tuple[str, str]:
    """``"case:INC-902"`` -> ``("case", "INC-902")``, split at the first colon (so
    ``"session:a:b"`` has the id ``a:b``); a pydantic error (``ANCHOR_FORM``) when either
    side is empty."""
    axis, sep, ident = text.partition(":")
    if not sep or not axis or not ident:
        raise PydanticCustomError("anchor", ANCHOR_FORM + ", got {given}", {"given": repr(text)})
    return axis, ident


class Anchor(BaseModel):
    """A scope anchor ``(axis_type, axis_id)``, e.g. ``("case", "INC-1041")``.

    Written and read as the string ``"axis:id"`` (``"case:INC-1041"``, ``"tenant:*"``):
    that is what every answer prints and what every write input takes. The object
    ``{"axis": ..., "id": ...}`` is still accepted on input, for writers of earlier
    versions; it is never printed, and the JSON schema names the string first.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    axis: str = Field(min_length=1)
    id: str = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: object) -> object:
        if isinstance(value, str):
            axis, ident = split_anchor(value)
            return {"axis": axis, "id": ident}
        if isinstance(value, dict | Anchor):
            return value
        raise PydanticCustomError("anchor", ANCHOR_FORM + ", got {given}", {"given": repr(value)})

    @model_serializer(mode="plain")
    def _as_text(self) -> str:
        return str(self)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        if handler.mode != "validation":
            return schema
        target = handler.resolve_ref_schema(schema)
        legacy = {k: v for k, v in target.items() if k not in ("title", "description")}
        legacy["description"] = "the same anchor as an object (accepted, never printed)"
        target.clear()
        target.update(
            title="Anchor",
            description='A scope anchor, "axis:id" (split at the first colon).',
            anyOf=[
                {"type": "string", "pattern": _ANCHOR_PATTERN, "examples": ["case:INC-902"]},
                legacy,
            ],
        )
        return schema

    def __str__(self) -> str:
        return f"{self.axis}:{self.id}"


class ItemWrite(BaseModel):
    """A proposed item (model §1). Carries no authority: only the write gate creates items.

    Shape rules checked here, before the gate: ``version`` and ``test`` belong
    to skills only; a validity window must not end before it starts;
    timestamps carry a timezone. Everything else is the gate's to judge.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Kind
    subject: str
    attribute: str = Field(min_length=1)
    object: Any
    required: list[str] = Field(default_factory=list)
    excluded: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    derived_from: list[int] = Field(default_factory=list)
    epistemic: Literal["hypothesis", "observation"] = "observation"
    content_type: str | None = None
    scope: Anchor
    facets: list[Anchor] = Field(default_factory=list)
    purposes: list[Purpose] = Field(default_factory=list)
    text: str | None = Field(default=None, max_length=4000)
    entities: list[NonEmpty] = Field(default_factory=list)
    salience: float = Field(default=0.5, ge=0.0, le=1.0)
    valid_from: AwareDatetime | None = None
    valid_to: AwareDatetime | None = None
    version: int | None = Field(default=None, ge=1)
    test: str | None = Field(default=None, min_length=1)

    @field_validator("object")
    @classmethod
    def _shallow_object(cls, value: Any) -> Any:
        if _plain_depth(value) > MAX_OBJECT_DEPTH:
            raise ValueError(f"object nests deeper than {MAX_OBJECT_DEPTH} levels")
        return value

    @model_validator(mode="after")
    def _skill_fields_and_window(self) -> ItemWrite:
        if self.kind != "skill" and (self.version is not None or self.test is not None):
            raise ValueError("version and test belong to skills (kind: skill) only")
        if (
            self.valid_from is not None
            and self.valid_to is not None
            and self.valid_to <= self.valid_from
        ):
            raise ValueError("valid_to must be after valid_from")
        return self
