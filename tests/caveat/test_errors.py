"""One error tree: every public refusal is reachable from caveat.errors, with a stable code."""

from __future__ import annotations

import caveat.cli  # imports every package, so every subclass is defined
import caveat.errors
from predicates.errors import CaveatError


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub, *_subclasses(sub)}
    return out


def test_every_public_error_is_exported_with_a_code() -> None:
    public = {c for c in _subclasses(CaveatError) if not c.__name__.startswith("_")}
    exported = {getattr(caveat.errors, n) for n in caveat.errors.__all__}
    missing = {c.__name__ for c in public - exported}
    assert missing == set(), missing
    for cls in public:
        assert cls.code and cls.code != "error", cls.__name__
        assert cls.code.islower() and " " not in cls.code, cls.code


def test_codes_name_one_kind_of_refusal() -> None:
    by_code: dict[str, set[str]] = {}
    for cls in _subclasses(CaveatError):
        by_code.setdefault(cls.code, set()).add(cls.__name__)
    # GateRejection carries its reason as an instance code; class codes are unique
    shared = {code: names for code, names in by_code.items() if len(names) > 1}
    assert shared == {}, shared
