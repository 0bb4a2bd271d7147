"""YAML files for the schema registry and for entities with their topology.

Schema file (a list, or a mapping with the key ``attributes`` and optionally
``registry``, the tenant's axes and content types: ``claims.registry_of_document``)::

    attributes:
      - attribute: config.connection_pool.max
        type: int
        unit: connections
        content_type: configuration
      - {attribute: metrics.pool_utilisation, type: float, max_age: 15m}
      - {attribute: "config.pools.*.max", type: int}

Entities file (a list of entities, or a mapping with ``entities`` and an
optional ``edges`` list)::

    entities:
      - id: payment-api
        kind: service
        aliases: [payment_api, paymentapi-prod]
        depends_on: [payments-db]
        runs_on: [node-7]
        edges: [{relation: calls, to: ledger}]
      - {id: payments-db, kind: database}
    edges:
      - {from: ledger, relation: depends_on, to: payments-db}

Every problem is a ``DocumentError`` naming the file, line and column.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta

from rapidfuzz import process

from factgen._document import Document, Path, load_yaml
from factgen._entities import EntitySpec
from factgen._schema import AttributeSpec
from predicates import Duration, ValueType, coerce
from predicates.errors import InputError, ValueTypeError

__all__ = ["load_entities_yaml", "load_schema_yaml"]

_SCHEMA_KEYS = ("attribute", "type", "unit", "max_age", "content_type")
_ENTITY_KEYS = ("id", "kind", "aliases", "depends_on", "runs_on", "edges")
_EDGE_KEYS = ("relation", "to")
_TOP_EDGE_KEYS = ("from", "relation", "to")
_WORD = re.compile(r"[a-z_][a-z0-9_]*")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\- ]*")


def _hint(name: str, choices: Iterable[str]) -> str:
    best = process.extractOne(name, list(choices), score_cutoff=60)
    return f" (did you mean {best[0]!r}?)" if best else ""


def _mapping(doc: Document, path: Path, node: object, allowed: Iterable[str]) -> dict[str, object]:
    allowed = tuple(allowed)
    if not isinstance(node, dict):
        raise doc.error(path, f"expected a mapping with keys {', '.join(allowed)}")
    for key in node:
        if key not in allowed:
            raise doc.error(
                (*path, key),
                f"unknown key {key!r}{_hint(key, allowed)}; allowed: {', '.join(allowed)}",
                key=True,
            )
    return node


def _required(doc: Document, path: Path, node: dict[str, object], key: str) -> object:
    if node.get(key) is None:
        raise doc.error(path, f"missing required key {key!r}")
    return node[key]


def _string(doc: Document, path: Path, value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise doc.error(path, f"{what} must be a non-empty string, not {value!r}")
    return value


def _list_of(doc: Document, path: Path, value: object, what: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise doc.error(path, f"{what} must be a list, not {value!r}")
    return value


def _top_list(doc: Document, key: str, others: Iterable[str] = ()) -> tuple[list[object], Path]:
    data = doc.data
    if data is None:
        return [], ()
    if isinstance(data, list):
        return data, ()
    if isinstance(data, dict):
        _mapping(doc, (), data, (key, *others))
        return _list_of(doc, (key,), data.get(key), key), (key,)
    raise doc.error((), f"expected a list, or a mapping with key {key!r}")


def _max_age(doc: Document, path: Path, value: object) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise doc.error(path, f"max_age is a duration like 15m or 2h, not {value!r}")
    try:
        duration = coerce(value, ValueType("duration"))
    except ValueTypeError as exc:
        raise doc.error(path, exc.message) from exc
    assert isinstance(duration, Duration)
    if duration.micros <= 0:
        raise doc.error(path, "max_age must be longer than zero")
    return timedelta(microseconds=duration.micros)


def load_schema_yaml(text: str, *, source: str = "<schema>") -> list[AttributeSpec]:
    """The attribute declarations of a schema file, in file order.

    Raises ``DocumentError`` (with line and column) for malformed YAML, an
    unknown key (with a suggestion), a missing ``attribute`` or ``type``, an
    invalid attribute name, type spec or ``max_age``, or an attribute declared
    twice in the file.
    """
    doc = load_yaml(text, source=source)
    # ``registry:`` is the tenant's axes and content types (``claims.registry_of_document``)
    entries, base = _top_list(doc, "attributes", ("registry",))
    seen: dict[str, int] = {}
    specs: list[AttributeSpec] = []
    for index, entry in enumerate(entries):
        path: Path = (*base, index)
        node = _mapping(doc, path, entry, _SCHEMA_KEYS)
        name = _string(
            doc, (*path, "attribute"), _required(doc, path, node, "attribute"), "attribute"
        )
        spec_text = _string(doc, (*path, "type"), _required(doc, path, node, "type"), "type")
        if name in seen:
            raise doc.error(
                (*path, "attribute"), f"{name!r} is already declared (entry {seen[name]})"
            )
        seen[name] = index
        try:
            vtype = ValueType.parse(spec_text)
        except InputError as exc:
            raise doc.error((*path, "type"), exc.message) from exc
        unit = node.get("unit")
        if unit is not None:
            unit = _string(doc, (*path, "unit"), unit, "unit")
        content_type = node.get("content_type")
        if content_type is not None and (
            not isinstance(content_type, str) or not _WORD.fullmatch(content_type)
        ):
            raise doc.error(
                (*path, "content_type"),
                f"content_type is a lower-case word like configuration, not {content_type!r}",
            )
        max_age = _max_age(doc, (*path, "max_age"), node.get("max_age"))
        try:
            spec = AttributeSpec(
                attribute=name, vtype=vtype, unit=unit, max_age=max_age, content_type=content_type
            )
        except InputError as exc:
            raise doc.error((*path, "attribute"), exc.message) from exc
        specs.append(spec)
    return specs


def _names(doc: Document, path: Path, value: object, what: str) -> list[str]:
    out = []
    for i, item in enumerate(_list_of(doc, path, value, what)):
        if not isinstance(item, str) or not _NAME.fullmatch(item):
            raise doc.error((*path, i), f"{what}: {item!r} is not an entity name")
        out.append(item)
    return out


def _relation(doc: Document, path: Path, value: object) -> str:
    if not isinstance(value, str) or not _WORD.fullmatch(value):
        raise doc.error(path, f"a relation is a lower-case word like depends_on, not {value!r}")
    return value


def load_entities_yaml(text: str, *, source: str = "<entities>") -> list[EntitySpec]:
    """The entities of an entities file, each with its aliases and outgoing edges.

    ``depends_on`` and ``runs_on`` are edges of that relation; ``edges`` (per
    entity, or at the top level with ``from``) any other. Edge targets are
    names: ``import_entities`` resolves them through aliases. Raises
    ``DocumentError`` (line and column) for malformed YAML, unknown keys, a
    missing ``id``/``kind``, an entity declared twice, or an edge from an
    entity the file does not declare.
    """
    doc = load_yaml(text, source=source)
    entries, base = _top_list(doc, "entities", ("edges",))
    order: list[str] = []
    kinds: dict[str, str] = {}
    aliases: dict[str, list[str]] = {}
    edges: dict[str, list[tuple[str, str]]] = {}
    for index, entry in enumerate(entries):
        path: Path = (*base, index)
        node = _mapping(doc, path, entry, _ENTITY_KEYS)
        eid = _string(doc, (*path, "id"), _required(doc, path, node, "id"), "id")
        if not _NAME.fullmatch(eid):
            raise doc.error((*path, "id"), f"{eid!r} is not an entity name")
        kind = _string(doc, (*path, "kind"), _required(doc, path, node, "kind"), "kind")
        if eid in kinds:
            raise doc.error((*path, "id"), f"entity {eid!r} is declared twice")
        order.append(eid)
        kinds[eid] = kind
        aliases[eid] = _names(doc, (*path, "aliases"), node.get("aliases"), "aliases")
        out = edges.setdefault(eid, [])
        for relation in ("depends_on", "runs_on"):
            for target in _names(doc, (*path, relation), node.get(relation), relation):
                out.append((relation, target))
        for j, edge in enumerate(_list_of(doc, (*path, "edges"), node.get("edges"), "edges")):
            epath: Path = (*path, "edges", j)
            enode = _mapping(doc, epath, edge, _EDGE_KEYS)
            relation = _relation(
                doc, (*epath, "relation"), _required(doc, epath, enode, "relation")
            )
            [target] = _names(doc, (*epath, "to"), [_required(doc, epath, enode, "to")], "to")
            out.append((relation, target))
    data = doc.data
    if isinstance(data, dict):
        for j, edge in enumerate(_list_of(doc, ("edges",), data.get("edges"), "edges")):
            epath = ("edges", j)
            enode = _mapping(doc, epath, edge, _TOP_EDGE_KEYS)
            src = _string(doc, (*epath, "from"), _required(doc, epath, enode, "from"), "from")
            if src not in kinds:
                raise doc.error(
                    (*epath, "from"),
                    f"{src!r} is not declared in this file{_hint(src, kinds)}",
                )
            relation = _relation(
                doc, (*epath, "relation"), _required(doc, epath, enode, "relation")
            )
            [target] = _names(doc, (*epath, "to"), [_required(doc, epath, enode, "to")], "to")
            edges[src].append((relation, target))
    return [
        EntitySpec(eid, kinds[eid], tuple(aliases[eid]), tuple(dict.fromkeys(edges[eid])))
        for eid in order
    ]
