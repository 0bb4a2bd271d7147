"""The portable regular-expression subset of ``matches``.

A pattern is accepted only when Python and PostgreSQL (``~``, advanced
regular expressions, non-newline-sensitive) give it the same meaning:

* literal characters; ``.`` (any character, newline included);
* ``^`` and ``$`` anchors (start and end of the whole string; ``$`` does not
  match before a trailing newline);
* bracket classes ``[abc]``, ``[^abc]``, ranges ``[a-z]`` (code points);
  inside a class ``-`` ``[`` ``]`` ``\\`` must be escaped;
* groups ``( )`` and ``(?: )``, alternation ``|`` (no empty alternatives);
* quantifiers ``*`` ``+`` ``?`` ``{m}`` ``{m,}`` ``{m,n}`` (n <= 255), one
  per atom, never on an anchor;
* escapes ``\\n`` ``\\t`` ``\\r`` and a backslash before any ASCII punctuation.

Refused, because the engines disagree or because it is not regular:
``\\d \\w \\s \\b`` and other letter escapes, POSIX classes, back references,
look-around, lazy and possessive quantifiers, inline flags, ``(?...)``
other than ``(?:``.

Matching is ``search`` semantics (the pattern may match anywhere unless
anchored). Because the subset is regular, Python evaluates it with a lazily
built DFA: time is linear in the input, whatever the pattern (no
catastrophic backtracking).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["MAX_PATTERN_LENGTH", "Pattern", "RegexError", "compile_pattern", "to_python"]

MAX_PATTERN_LENGTH = 1000
_MAX_NFA_STATES = 10_000
_MAX_BOUND = 255
_MAX_DEPTH = 50
_MAX_DFA_STATES = 4096
_PUNCT = frozenset(string.punctuation)
_BOUND_RE = re.compile(r"\{([0-9]{1,3})(,([0-9]{1,3})?)?\}")
_CONTROL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
_ENGINE_ESCAPES = frozenset("dDwWsSbBAZzmMyYvfaexucUpPkKgGhHN0123456789")


class RegexError(Exception):
    """A pattern outside the portable subset; ``position`` is 0-based in the pattern."""

    def __init__(self, reason: str, position: int) -> None:
        super().__init__(f"{reason} (at offset {position})")
        self.reason = reason
        self.position = position


# --- AST -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Set:
    ranges: tuple[tuple[int, int], ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class _Anchor:
    end: bool


@dataclass(frozen=True, slots=True)
class _Cat:
    items: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Alt:
    branches: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Rep:
    node: _Node
    lo: int
    hi: int | None


_Node = _Set | _Anchor | _Cat | _Alt | _Rep
_EMPTY = _Cat(())


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def parse(self) -> _Node:
        node = self.alt(0)
        if self.i < len(self.p):
            raise RegexError("unmatched ')'", self.i)
        return node

    def alt(self, depth: int) -> _Node:
        if depth > _MAX_DEPTH:
            raise RegexError("groups nested too deeply", self.i)
        branches = [self.concat(depth)]
        while self.peek() == "|":
            bar = self.i
            self.i += 1
            branches.append(self.concat(depth))
            if branches[-1] == _EMPTY or branches[-2] == _EMPTY:
                raise RegexError("empty alternative around '|'", bar)
        return branches[0] if len(branches) == 1 else _Alt(tuple(branches))

    def concat(self, depth: int) -> _Node:
        items: list[_Node] = []
        while (c := self.peek()) is not None and c not in "|)":
            items.append(self.repeat(depth))
        return items[0] if len(items) == 1 else _Cat(tuple(items))

    def repeat(self, depth: int) -> _Node:
        atom = self.atom(depth)
        c = self.peek()
        if c is None or c not in "*+?{":
            return atom
        qpos = self.i
        lo, hi = self.quantifier()
        if _has_anchor(atom):
            raise RegexError("an anchor (^ or $) cannot be repeated", qpos)
        if (c := self.peek()) is not None and c in "*+?{":
            raise RegexError(
                "a quantifier cannot follow a quantifier (no lazy or possessive forms)", self.i
            )
        return _Rep(atom, lo, hi)

    def quantifier(self) -> tuple[int, int | None]:
        c = self.p[self.i]
        self.i += 1
        if c == "*":
            return 0, None
        if c == "+":
            return 1, None
        if c == "?":
            return 0, 1
        start = self.i - 1
        m = _BOUND_RE.match(self.p, start)
        if m is None:
            raise RegexError(
                "'{' starts a bound {m}, {m,} or {m,n}; escape a literal '{' as '\\{'", start
            )
        lo = int(m.group(1))
        hi: int | None = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        if lo > _MAX_BOUND or (hi is not None and hi > _MAX_BOUND):
            raise RegexError(f"bounds are at most {_MAX_BOUND}", start)
        if hi is not None and hi < lo:
            raise RegexError("in {m,n}, m must not exceed n", start)
        self.i = m.end()
        return lo, hi

    def atom(self, depth: int) -> _Node:
        c = self.p[self.i]
        start = self.i
        if c == "(":
            self.i += 1
            if self.peek() == "?":
                if self.p[self.i : self.i + 2] != "?:":
                    raise RegexError("only (...) and (?:...) groups are supported", start)
                self.i += 2
            node = self.alt(depth + 1)
            if self.peek() != ")":
                raise RegexError("missing ')'", start)
            self.i += 1
            if node == _EMPTY:
                raise RegexError("empty group", start)
            return node
        if c == "[":
            return self.bracket()
        self.i += 1
        if c == ".":
            return _Set((), True)
        if c == "^":
            return _Anchor(end=False)
        if c == "$":
            return _Anchor(end=True)
        if c == "\\":
            return _char(self.escape(start))
        if c in "*+?{":
            raise RegexError(f"nothing to repeat before '{c}'", start)
        if c in "]}":
            raise RegexError(f"escape a literal '{c}' as '\\{c}'", start)
        return _char(c)

    def escape(self, start: int) -> str:
        if self.i >= len(self.p):
            raise RegexError("pattern ends with a backslash", start)
        c = self.p[self.i]
        self.i += 1
        if c in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[c]
        if c in _PUNCT:
            return c
        if c in _ENGINE_ESCAPES:
            raise RegexError(
                f"'\\{c}' means different things in PostgreSQL and Python; "
                "write a class such as [0-9] or [A-Za-z_] instead",
                start,
            )
        raise RegexError(f"unsupported escape '\\{c}'", start)

    def bracket(self) -> _Node:
        start = self.i
        self.i += 1
        negated = False
        if self.peek() == "^":
            negated = True
            self.i += 1
        if self.peek() == "]":
            raise RegexError("empty class; escape a literal ']' as '\\]'", start)
        ranges: list[tuple[int, int]] = []
        while True:
            c = self.peek()
            if c is None:
                raise RegexError("missing ']'", start)
            if c == "]":
                self.i += 1
                break
            lo = self.class_char()
            hi = lo
            if self.peek() == "-":
                dash = self.i
                self.i += 1
                if self.peek() in (None, "]"):
                    raise RegexError("escape a literal '-' in a class as '\\-'", dash)
                hi = self.class_char()
                if ord(hi) < ord(lo):
                    raise RegexError(f"range {lo!r}-{hi!r} is reversed", dash)
            ranges.append((ord(lo), ord(hi)))
        return _Set(tuple(ranges), negated)

    def class_char(self) -> str:
        c = self.p[self.i]
        pos = self.i
        if c == "\\":
            self.i += 1
            return self.escape(pos)
        if c == "[":
            raise RegexError("escape a literal '[' in a class as '\\['", pos)
        if c == "-":
            raise RegexError("escape a literal '-' in a class as '\\-'", pos)
        self.i += 1
        return c


def _char(c: str) -> _Set:
    return _Set(((ord(c), ord(c)),), False)


def _has_anchor(node: _Node) -> bool:
    if isinstance(node, _Anchor):
        return True
    if isinstance(node, _Cat):
        return any(_has_anchor(n) for n in node.items)
    if isinstance(node, _Alt):
        return any(_has_anchor(n) for n in node.branches)
    if isinstance(node, _Rep):
        return _has_anchor(node.node)
    return False


def _size(node: _Node) -> int:
    if isinstance(node, _Set | _Anchor):
        return 1
    if isinstance(node, _Cat):
        return sum(_size(n) for n in node.items)
    if isinstance(node, _Alt):
        return sum(_size(n) for n in node.branches) + len(node.branches)
    inner = _size(node.node)
    if node.hi is None:
        return inner * (node.lo + 1) + 1
    return inner * node.hi + (node.hi - node.lo) + 1


# --- NFA and lazy DFA ------------------------------------------------------

_CHAR, _SPLIT, _BOL, _EOL, _MATCH = range(5)


class _NFA:
    def __init__(self) -> None:
        self.kinds: list[int] = []
        self.sets: list[_Set | None] = []
        self.outs: list[list[int]] = []

    def add(self, kind: int, cs: _Set | None, outs: list[int]) -> int:
        self.kinds.append(kind)
        self.sets.append(cs)
        self.outs.append(outs)
        return len(self.kinds) - 1

    def build(self, node: _Node, nxt: int) -> int:
        if isinstance(node, _Set):
            return self.add(_CHAR, node, [nxt])
        if isinstance(node, _Anchor):
            return self.add(_EOL if node.end else _BOL, None, [nxt])
        if isinstance(node, _Cat):
            for item in reversed(node.items):
                nxt = self.build(item, nxt)
            return nxt
        if isinstance(node, _Alt):
            return self.add(_SPLIT, None, [self.build(b, nxt) for b in node.branches])
        if node.hi is None:
            loop = self.add(_SPLIT, None, [])
            self.outs[loop].extend([self.build(node.node, loop), nxt])
            state = loop
        else:
            state = nxt
            for _ in range(node.hi - node.lo):
                state = self.add(_SPLIT, None, [self.build(node.node, state), nxt])
        for _ in range(node.lo):
            state = self.build(node.node, state)
        return state


def _contains(cs: _Set, code: int) -> bool:
    hit = False
    for lo, hi in cs.ranges:
        if lo <= code <= hi:
            hit = True
            break
    return hit != cs.negated


class Pattern:
    """A compiled portable pattern; ``search(s)`` is True when it matches anywhere in ``s``."""

    def __init__(self, source: str, node: _Node) -> None:
        self.source = source
        self._node = node
        self._literal = _literal_form(node)
        nfa = _NFA()
        match = nfa.add(_MATCH, None, [])
        start = nfa.build(node, match)
        self._kinds = nfa.kinds
        self._sets = nfa.sets
        self._outs = nfa.outs
        self._match = match
        self._restart = self._closure([start], at_start=False)
        self._ids: dict[frozenset[int], int] = {}
        self._states: list[frozenset[int]] = []
        self._trans: list[dict[str, int]] = []
        self._accepting: list[bool] = []
        self._initial = self._intern(self._closure([start], at_start=True))

    def __repr__(self) -> str:
        return f"Pattern({self.source!r})"

    def _closure(self, seeds: list[int], *, at_start: bool) -> frozenset[int]:
        kinds, outs = self._kinds, self._outs
        found: set[int] = set()
        seen: set[int] = set()
        stack = list(seeds)
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            kind = kinds[s]
            if kind == _SPLIT:
                stack.extend(outs[s])
            elif kind == _BOL:
                if at_start:
                    stack.append(outs[s][0])
            else:
                found.add(s)
        return frozenset(found)

    def _intern(self, states: frozenset[int]) -> int:
        ident = self._ids.get(states)
        if ident is None:
            if len(self._states) >= _MAX_DFA_STATES:
                return -1
            self._states.append(states)
            self._trans.append({})
            self._accepting.append(self._match in states)
            ident = len(self._states) - 1
            self._ids[states] = ident
        return ident

    def _step(self, states: frozenset[int], ch: str) -> frozenset[int]:
        code = ord(ch)
        kinds, sets, outs = self._kinds, self._sets, self._outs
        seeds = []
        for s in states:
            if kinds[s] == _CHAR:
                cs = sets[s]
                assert cs is not None
                if _contains(cs, code):
                    seeds.append(outs[s][0])
        return self._closure(seeds, at_start=False) | self._restart

    def _accepts_at_end(self, states: frozenset[int], *, at_start: bool) -> bool:
        kinds, outs = self._kinds, self._outs
        seen: set[int] = set()
        stack = list(states)
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            kind = kinds[s]
            if kind == _MATCH:
                return True
            if kind in (_SPLIT, _EOL) or (kind == _BOL and at_start):
                stack.extend(outs[s])
        return False

    def search(self, text: str) -> bool:
        """True iff the pattern matches somewhere in ``text`` (linear time)."""
        lit = self._literal
        if lit is not None:
            body, anchored_start, anchored_end = lit
            if anchored_start and anchored_end:
                return text == body
            if anchored_start:
                return text.startswith(body)
            if anchored_end:
                return text.endswith(body)
            return body in text
        cur = self._initial
        if self._accepting[cur]:
            return True
        trans, accepting = self._trans, self._accepting
        pending: frozenset[int] | None = None
        for ch in text:
            if pending is None:
                nxt = trans[cur].get(ch)
                if nxt is None:
                    nxt_states = self._step(self._states[cur], ch)
                    nxt = self._intern(nxt_states)
                    if nxt < 0:
                        pending = nxt_states
                        if self._match in pending:
                            return True
                        continue
                    trans[cur][ch] = nxt
                cur = nxt
                if accepting[cur]:
                    return True
            else:
                pending = self._step(pending, ch)
                if self._match in pending:
                    return True
        final = self._states[cur] if pending is None else pending
        return self._accepts_at_end(final, at_start=not text)


def _literal_form(node: _Node) -> tuple[str, bool, bool] | None:
    items = list(node.items) if isinstance(node, _Cat) else [node]
    anchored_start = bool(items) and items[0] == _Anchor(end=False)
    if anchored_start:
        items = items[1:]
    anchored_end = bool(items) and items[-1] == _Anchor(end=True)
    if anchored_end:
        items = items[:-1]
    chars: list[str] = []
    for item in items:
        if not isinstance(item, _Set) or item.negated or len(item.ranges) != 1:
            return None
        lo, hi = item.ranges[0]
        if lo != hi:
            return None
        chars.append(chr(lo))
    return "".join(chars), anchored_start, anchored_end


@lru_cache(maxsize=2048)
def compile_pattern(source: str) -> Pattern:
    """Parse and compile ``source``; RegexError when it is outside the portable subset."""
    if len(source) > MAX_PATTERN_LENGTH:
        raise RegexError(f"patterns are at most {MAX_PATTERN_LENGTH} characters", 0)
    node = _Parser(source).parse()
    if _size(node) > _MAX_NFA_STATES:
        raise RegexError("pattern too complex (counted repetitions expand too far)", 0)
    return Pattern(source, node)


def to_python(pattern: Pattern) -> str:
    """An equivalent Python ``re`` pattern, to be compiled with ``re.DOTALL`` (for tests)."""
    return _emit(pattern._node)


def _emit_code(code: int) -> str:
    return f"\\U{code:08x}" if code > 0xFFFF else f"\\u{code:04x}"


def _emit(node: _Node) -> str:
    if isinstance(node, _Set):
        if not node.ranges:
            return "." if node.negated else "[^\\s\\S]"
        body = "".join(
            _emit_code(lo) if lo == hi else f"{_emit_code(lo)}-{_emit_code(hi)}"
            for lo, hi in node.ranges
        )
        return f"[{'^' if node.negated else ''}{body}]"
    if isinstance(node, _Anchor):
        return "\\Z" if node.end else "\\A"
    if isinstance(node, _Cat):
        return "".join(f"(?:{_emit(n)})" for n in node.items)
    if isinstance(node, _Alt):
        return "(?:" + "|".join(_emit(b) for b in node.branches) + ")"
    hi = "" if node.hi is None else str(node.hi)
    return f"(?:{_emit(node.node)}){{{node.lo},{hi}}}"
