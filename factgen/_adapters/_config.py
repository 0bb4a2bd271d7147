"""Configuration documents (JSON or YAML) flattened to dotted attributes.

``{"connection_pool": {"max": 20}}`` under the prefix ``config.`` is the
observation ``config.connection_pool.max = 20``. The rules (docs/factgen.md):

* mappings nest; a key may itself be dotted (``pool.max: 20``) when every
  part is a valid segment; two keys that flatten to one attribute are an error;
* every other value is a leaf, typed strictly against the schema when its
  attribute is declared (a list, a quoted number, a float for an int: refused,
  and the whole document with it);
* a leaf whose attribute is not declared is skipped and reported
  (``undeclared``), as is a null (``null``: an unset key is no observation)
  and a key that cannot be an attribute segment (``invalid_name``);
* empty mappings contribute nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from sqlalchemy.orm import Session

from factgen._access import Actor
from factgen._adapters._common import ImportResult, Skipped, store_observations
from factgen._document import Document, Path, load_text
from factgen._facts import Observation
from factgen._world import World
from predicates.errors import InputError

__all__ = [
    "config_observations",
    "flatten_config",
    "import_config",
    "normalise_prefix",
    "unflatten_config",
]

_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _prefix_parts(prefix: str) -> tuple[str, ...]:
    stripped = prefix.strip(".")
    if not stripped:
        return ()
    parts = tuple(stripped.split("."))
    if not all(_SEGMENT.fullmatch(p) for p in parts):
        raise InputError(
            f"invalid prefix {prefix!r}: dotted names like config. or app.db.", prefix=prefix
        )
    return parts


def normalise_prefix(prefix: str) -> str:
    """``config`` -> ``config.``; ``""`` stays empty; ``InputError`` for a bad prefix."""
    parts = _prefix_parts(prefix)
    return ".".join(parts) + "." if parts else ""


def _walk(
    node: Mapping[str, object], parts: tuple[str, ...], path: Path
) -> list[tuple[tuple[str, ...] | None, Path, object]]:
    """(attribute segments or None when a key is not a segment, document path, leaf)."""
    out: list[tuple[tuple[str, ...] | None, Path, object]] = []
    for key, value in node.items():
        child: Path = (*path, key)
        segments = tuple(str(key).split("."))
        valid = all(_SEGMENT.fullmatch(s) for s in segments)
        if isinstance(value, Mapping):
            if valid:
                out.extend(_walk(value, (*parts, *segments), child))
            else:
                out.append((None, child, value))
        else:
            out.append(((*parts, *segments) if valid else None, child, value))
    return out


def flatten_config(document: Mapping[str, object], prefix: str = "config.") -> dict[str, object]:
    """``{attribute: leaf}`` for every leaf whose keys are valid segments (see module doc).

    Raises ``InputError`` when two keys flatten to one attribute. Keys that
    are not segments are left out (``config_observations`` reports them).
    """
    out: dict[str, object] = {}
    for segments, _path, leaf in _walk(document, _prefix_parts(prefix), ()):
        if segments is None:
            continue
        attribute = ".".join(segments)
        if attribute in out:
            raise InputError(f"two keys flatten to {attribute!r}", attribute=attribute)
        out[attribute] = leaf
    return out


def unflatten_config(flat: Mapping[str, object], prefix: str = "config.") -> dict[str, object]:
    """The nested document of ``flat`` under ``prefix``: ``flatten_config``'s inverse.

    ``unflatten_config(flatten_config(d, p), p) == d`` for every document
    whose keys are single segments, whose leaves are not mappings, and that
    has no empty mapping. Raises ``InputError`` for an attribute outside
    ``prefix`` or one that is both a leaf and a parent.
    """
    parts = _prefix_parts(prefix)
    root: dict[str, object] = {}
    for attribute, leaf in flat.items():
        segments = tuple(attribute.split("."))
        if segments[: len(parts)] != parts or len(segments) == len(parts):
            raise InputError(f"{attribute!r} is not under the prefix {prefix!r}")
        node = root
        for seg in segments[len(parts) : -1]:
            child = node.setdefault(seg, {})
            if not isinstance(child, dict):
                raise InputError(f"{attribute!r}: {seg!r} is both a value and a mapping")
            node = child
        if segments[-1] in node:
            raise InputError(f"{attribute!r}: is both a value and a mapping")
        node[segments[-1]] = leaf
    return root


def config_observations(
    world: World,
    document: Document,
    *,
    subject: str,
    prefix: str = "config.",
    source: str | None = None,
) -> tuple[list[Observation], list[Skipped], list[int | None]]:
    """Observations of the declared leaves, what was skipped, and the line of each observation.

    Nothing is typed yet (``store_observations`` does it for the whole batch);
    ``DocumentError`` when the document is not a mapping or two keys collide.
    """
    if not isinstance(document.data, dict):
        raise document.error((), "a configuration document is a mapping of keys to values")
    observations: list[Observation] = []
    skipped: list[Skipped] = []
    lines: list[int | None] = []
    seen: dict[str, Path] = {}
    for segments, path, leaf in _walk(document.data, _prefix_parts(prefix), ()):
        line = document.where(path)[0]
        if segments is None:
            key = ".".join(str(p) for p in path)
            skipped.append(Skipped(key, "invalid_name", line))
            continue
        attribute = ".".join(segments)
        if attribute in seen:
            other = document.where(seen[attribute])[0]
            raise document.error(
                path, f"flattens to {attribute!r} like the key at line {other}", key=True
            )
        seen[attribute] = path
        if leaf is None:
            skipped.append(Skipped(attribute, "null", line))
        elif world.schema.get(attribute) is None:
            skipped.append(Skipped(attribute, "undeclared", line))
        else:
            observations.append(Observation(subject, attribute, leaf, source))
            lines.append(line)
    return observations, skipped, lines


def import_config(
    *,
    session: Session,
    world: World,
    actor: Actor,
    text: str,
    subject: str,
    observed_at: datetime,
    now: datetime,
    prefix: str = "config.",
    syntax: str | None = None,
    source_name: str = "<config>",
    source: str | None = None,
) -> ImportResult:
    """Parse, flatten, type and store a configuration document, atomically.

    ``subject`` must resolve (``SubjectUnresolved``); the document must parse
    (``DocumentError`` with line and column); every declared leaf must have
    its attribute's type (``ValueTypeError`` with attribute, expected type,
    value and line). On any error nothing is stored. The fact source is
    ``source``, by default ``config:<source_name>``.
    """
    actor.require("observe")
    prefix = normalise_prefix(prefix)
    canonical = world.resolver.resolve(subject)
    document = load_text(text, source=source_name, syntax=syntax)
    observations, skipped, lines = config_observations(
        world,
        document,
        subject=canonical,
        prefix=prefix,
        source=source or f"config:{source_name}",
    )
    facts = store_observations(
        session=session,
        world=world,
        batches=[(observed_at, observations)],
        now=now,
        line_of=lambda i: lines[i],
        source_name=source_name,
    )
    return ImportResult(facts=tuple(facts), skipped=tuple(skipped))
