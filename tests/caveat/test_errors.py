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
    exported = {
        e for n in caveat.errors.__all__ if isinstance(e := getattr(caveat.errors, n), type)
    }
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


def test_every_code_has_one_status_at_the_doors() -> None:
    """``caveat.errors.STATUS`` is the one table of HTTP and exit statuses: every code
    of the error tree and every write reason code (model §3.2, §8) is in it, bad
    input exits 2 and everything else that refuses exits 1."""
    import claims
    from caveat.errors import STATUS, status_of
    from predicates.errors import InputError

    classes = {c for c in _subclasses(CaveatError) if not c.__name__.startswith("_")}
    codes = {c.code for c in classes} | set(claims.REASON_CODES)
    assert codes - set(STATUS) == set()
    for cls in classes:
        status = STATUS[cls.code]
        assert status.exit == (2 if issubclass(cls, InputError) else 1), cls.__name__
        assert 400 <= status.http < 600, cls.__name__
    assert status_of(InputError("x", code="some_new_code")).exit == 2
