"""The parser facade: loads ``grammar.lark`` once and maps every failure to
``PredicateSyntaxError`` with a 1-based line and column."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import sys
import tempfile
from datetime import datetime
from decimal import Decimal, InvalidOperation
from functools import cache
from importlib import resources
from typing import Any

import lark
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from predicates._ast import Attribute, Op, Predicate, Scalar
from predicates._regex import RegexError, compile_pattern
from predicates._values import (
    MAX_NUMBER_DIGITS,
    MAX_PREDICATE_LENGTH,
    Version,
    check_string,
    number_fits,
    parse_duration_literal,
    parse_timestamp_literal,
)
from predicates.errors import InputError, PredicateSyntaxError, ValueTypeError

__all__ = ["MAX_PREDICATE_LENGTH", "grammar_text", "line_column", "parse"]

_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
_OPTIONS: dict[str, Any] = {
    "parser": "lalr",
    "propagate_positions": True,
    "maybe_placeholders": False,
}
_FRIENDLY = {
    "PATH": "attribute",
    "ENTITY": "@entity:",
    "TIMESTAMP": "timestamp",
    "DURATION": "duration",
    "DECIMAL": "decimal",
    "INTEGER": "integer",
    "VERSION": "version",
    "STRING": "string",
    "$END": "end of input",
}
_OPS = {f"op_{op.value}": op for op in Op}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}

logging.getLogger("lark").setLevel(logging.CRITICAL)


def grammar_text() -> str:
    """The grammar source shipped as package data."""
    return resources.files("predicates").joinpath("grammar.lark").read_text(encoding="utf-8")


def _strict_available() -> bool:
    # Lark's strict mode checks terminal collisions with `interegular`; the
    # runtime behaviour of the built parser does not depend on it.
    try:
        import interegular  # noqa: F401
    except ImportError:
        return False
    return True


def _cache_path(grammar: str, strict: bool) -> str | None:
    """A grammar cache file in a private per-user directory, or None when unsafe."""
    key = hashlib.sha256(
        f"{grammar}\0{lark.__version__}\0{sys.version_info[:2]}\0{strict}".encode()
    ).hexdigest()[:24]
    try:
        uid = os.getuid() if hasattr(os, "getuid") else 0
        directory = os.path.join(tempfile.gettempdir(), f"caveat-predicates-{uid}")
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.stat(directory, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode) or (hasattr(os, "getuid") and info.st_uid != uid):
            return None
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        if not os.access(directory, os.W_OK | os.R_OK | os.X_OK):
            return None
    except OSError:
        return None
    return os.path.join(directory, f"grammar-{key}.lark-cache")


@cache
def _parser() -> Lark:
    grammar = grammar_text()
    strict = _strict_available()
    path = _cache_path(grammar, strict)
    if path is not None:
        try:
            return Lark(grammar, strict=strict, cache=path, **_OPTIONS)
        except Exception:  # a broken cache must never break parsing
            with contextlib.suppress(OSError):
                os.unlink(path)
    return Lark(grammar, strict=strict, **_OPTIONS)


def line_column(text: str, pos: int) -> tuple[int, int]:
    """1-based (line, column) of offset ``pos``, counting lines like ``str.splitlines``."""
    line, col = 1, 1
    i = 0
    end = min(max(pos, 0), len(text))
    while i < end:
        ch = text[i]
        if ch in _LINE_BREAKS:
            if ch == "\r" and i + 1 < len(text) and text[i + 1] == "\n":
                i += 1
                if i >= end:
                    break
            line += 1
            col = 1
        else:
            col += 1
        i += 1
    return line, col


class _LiteralError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def _error(
    text: str, message: str, pos: int, expected: list[str] | None = None
) -> PredicateSyntaxError:
    line, column = line_column(text, pos)
    return PredicateSyntaxError(message, text=text, line=line, column=column, expected=expected)


def _expected_names(names: set[str] | frozenset[str]) -> list[str]:
    parser = _parser()
    out: set[str] = set()
    for name in names:
        if name in _FRIENDLY:
            out.add(_FRIENDLY[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:
            out.add(name.lower())
            continue
        if pattern.type == "str":
            out.add(str(pattern.value))
        else:
            out.add(name.lower())
    return sorted(out)


def _describe(token: Token) -> str:
    if token.type == "$END":
        return "end of input"
    value = str(token)
    if len(value) > 40:
        value = value[:37] + "..."
    return repr(value)


def parse(text: str) -> Predicate:
    """Parse one predicate.

    Guarantees: returns a valid ``Predicate`` or raises ``PredicateSyntaxError``
    (1-based ``line``/``column``, ``expected`` tokens, ``caret()``); no other
    exception escapes, whatever the input.
    """
    if not isinstance(text, str):
        raise PredicateSyntaxError(
            f"a predicate is text, not {type(text).__name__}", text="", line=1, column=1
        )
    try:
        return _parse(text)
    except PredicateSyntaxError:
        raise
    except Exception as exc:  # defensive: nothing but PredicateSyntaxError escapes
        raise _error(text, f"could not parse predicate: {exc}", 0) from exc


def _parse(text: str) -> Predicate:
    if len(text) > MAX_PREDICATE_LENGTH:
        raise _error(
            text, f"predicate longer than {MAX_PREDICATE_LENGTH} characters", MAX_PREDICATE_LENGTH
        )
    if not text.strip():
        raise _error(text, "empty predicate: expected `attribute operator value`", 0, ["attribute"])
    try:
        tree = _parser().parse(text)
    except UnexpectedToken as exc:
        token = exc.token
        if token.type == "$END":
            pos = len(text.rstrip())
        else:
            pos = token.start_pos if token.start_pos is not None else 0
        expected = _expected_names(exc.accepts or exc.expected)
        message = f"unexpected {_describe(token)}"
        if expected:
            message += f"; expected {_one_of(expected)}"
        raise _error(text, message, pos, expected) from exc
    except UnexpectedCharacters as exc:
        expected = _expected_names(exc.allowed or set())
        pos = exc.pos_in_stream or 0
        message = f"unexpected character {text[pos]!r}" if pos < len(text) else "unexpected input"
        if expected:
            message += f"; expected {_one_of(expected)}"
        raise _error(text, message, pos, expected) from exc
    except UnexpectedEOF as exc:
        expected = _expected_names(set(exc.expected))
        raise _error(
            text,
            f"unexpected end of input; expected {_one_of(expected)}",
            len(text.rstrip()),
            expected,
        ) from exc
    except UnexpectedInput as exc:  # pragma: no cover - other Lark input errors
        pos = getattr(exc, "pos_in_stream", 0) or 0
        raise _error(text, f"cannot parse predicate: {exc}", pos) from exc
    try:
        return _build(tree)
    except _LiteralError as exc:
        raise _error(text, exc.message, exc.pos) from exc
    except InputError as exc:
        raise _error(text, exc.message, 0) from exc


def _one_of(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    return "one of " + ", ".join(names)


def _build(tree: Tree[Token]) -> Predicate:
    attr_tree, op_tree, *rest = tree.children
    assert isinstance(attr_tree, Tree) and isinstance(op_tree, Tree)
    attribute = _attribute(attr_tree)
    op = _OPS[str(op_tree.data)]
    value: Scalar | tuple[Scalar, ...] | None
    if tree.data == "presence":
        value = None
    elif tree.data == "member":
        (list_tree,) = rest
        assert isinstance(list_tree, Tree)
        value = tuple(_scalar(child) for child in list_tree.children if isinstance(child, Tree))
    elif tree.data == "text":
        (token,) = rest
        assert isinstance(token, Token)
        value = _string(token)
        if op is Op.MATCHES:
            _check_pattern(token, value)
    else:
        (scalar_tree,) = rest
        assert isinstance(scalar_tree, Tree)
        value = _scalar(scalar_tree)
    return Predicate(attribute, op, value)


def _attribute(tree: Tree[Token]) -> Attribute:
    entity: str | None = None
    path = ""
    for tok in tree.children:
        assert isinstance(tok, Token)
        if tok.type == "ENTITY":
            entity = str(tok)[1:-1]
        else:
            path = str(tok)
    if len(path) > 512:
        raise _LiteralError("attribute path too long", _pos(tree.children[-1]))
    if entity is not None and len(entity) > 512:
        raise _LiteralError("entity name too long", _pos(tree.children[0]))
    return Attribute(entity, path)


def _pos(node: object) -> int:
    if isinstance(node, Token) and node.start_pos is not None:
        return node.start_pos
    return 0


def _scalar(tree: Tree[Token]) -> Scalar:
    kind = str(tree.data)
    if kind == "true":
        return True
    if kind == "false":
        return False
    (token,) = tree.children
    assert isinstance(token, Token)
    text = str(token)
    pos = _pos(token)
    if kind == "string":
        return _string(token)
    if kind == "integer":
        if len(text.lstrip("-").lstrip("0")) > MAX_NUMBER_DIGITS:
            raise _LiteralError(f"integer literal longer than {MAX_NUMBER_DIGITS} digits", pos)
        return int(text)
    if kind == "decimal":
        try:
            number = Decimal(text)
        except InvalidOperation:  # pragma: no cover - the terminal only matches digits
            raise _LiteralError(f"invalid decimal {text!r}", pos) from None
        if not number_fits(number):
            raise _LiteralError(f"decimal literal longer than {MAX_NUMBER_DIGITS} digits", pos)
        return number
    try:
        if kind == "duration":
            return parse_duration_literal(text)
        if kind == "version":
            return Version.parse(text)
        if kind == "timestamp":
            value: datetime = parse_timestamp_literal(text)
            return value
    except ValueTypeError as exc:
        raise _LiteralError(exc.message, pos) from None
    raise AssertionError(f"unknown literal kind {kind}")  # pragma: no cover


def _decode(token: Token) -> tuple[str, list[int]]:
    """Decode a string token; returns the text and, per decoded char, its source offset."""
    raw = str(token)
    base = _pos(token)
    out: list[str] = []
    offsets: list[int] = []
    i = 1
    end = len(raw) - 1
    while i < end:
        ch = raw[i]
        if ch != "\\":
            out.append(ch)
            offsets.append(base + i)
            i += 1
            continue
        esc = raw[i + 1]
        if esc in _ESCAPES:
            out.append(_ESCAPES[esc])
            offsets.append(base + i)
            i += 2
            continue
        if esc != "u":
            raise _LiteralError(
                f"invalid escape '\\{esc}' (use \\\" \\\\ \\n \\t \\r \\uXXXX)", base + i
            )
        code = _hex4(raw, i + 2, base + i)
        width = 6
        if 0xD800 <= code <= 0xDBFF and raw[i + 6 : i + 8] == "\\u":
            low = _hex4(raw, i + 8, base + i + 6)
            if 0xDC00 <= low <= 0xDFFF:
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                width = 12
        if code == 0 or 0xD800 <= code <= 0xDFFF:
            raise _LiteralError(
                "strings cannot contain NUL or lone surrogates (\\u0000, \\uD800-\\uDFFF)",
                base + i,
            )
        out.append(chr(code))
        offsets.append(base + i)
        i += width
    return "".join(out), offsets


def _hex4(raw: str, at: int, pos: int) -> int:
    digits = raw[at : at + 4]
    if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise _LiteralError("\\u must be followed by four hex digits", pos)
    return int(digits, 16)


def _string(token: Token) -> str:
    value, offsets = _decode(token)
    problem = check_string(value)
    if problem is not None:
        bad = next(i for i, ch in enumerate(value) if ch == "\x00" or "\ud800" <= ch <= "\udfff")
        raise _LiteralError(problem, offsets[bad])
    return value


def _check_pattern(token: Token, value: str) -> None:
    try:
        compile_pattern(value)
    except RegexError as exc:
        _, offsets = _decode(token)
        pos = offsets[exc.position] if exc.position < len(offsets) else _pos(token) + len(token) - 1
        raise _LiteralError(f"invalid pattern for `matches`: {exc.reason}", pos) from None
