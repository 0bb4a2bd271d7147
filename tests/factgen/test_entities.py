"""Entity normalisation and resolution: a name resolves, or says why not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factgen import EntitySpec, Resolver, Topology, normalise
from factgen._entities import alias_table
from predicates.errors import InputError, SubjectUnresolved

SUFFIXES = ("prod", "production")


@pytest.mark.parametrize(
    "name",
    ["payment-api", "payment_api", "Payment.API", "paymentapi-prod", "PAYMENT_API_PROD"],
)
def test_spellings_of_one_service_normalise_alike(name: str) -> None:
    assert normalise(name, SUFFIXES) == "paymentapi"


def test_a_suffix_alone_is_not_stripped_to_nothing() -> None:
    assert normalise("prod", SUFFIXES) == "prod"


def test_undeclared_suffix_is_kept() -> None:
    assert normalise("payment-api-staging", SUFFIXES) == "paymentapistaging"


@given(st.text(alphabet="abcXYZ-_. 019", max_size=20))
def test_normalise_is_idempotent(name: str) -> None:
    once = normalise(name, SUFFIXES)
    assert normalise(once, SUFFIXES) == once or once.endswith(SUFFIXES)


def _resolver() -> Resolver:
    entities = [
        EntitySpec("payment-api", "service", ("payment_api", "paymentapi-prod")),
        EntitySpec("payments-db", "database"),
        EntitySpec("orders-db", "database"),
    ]
    return Resolver(alias_table(entities, SUFFIXES), SUFFIXES)


def test_aliases_resolve_to_the_canonical_id() -> None:
    r = _resolver()
    assert {r.resolve(n) for n in ("payment_api", "paymentapi-prod", "Payment-API")} == {
        "payment-api"
    }


def test_unknown_name_never_resolves_silently_and_suggests() -> None:
    r = _resolver()
    with pytest.raises(SubjectUnresolved) as err:
        r.resolve("payment-apl")
    assert err.value.code == "subject_unresolved"
    assert err.value.detail["suggestions"][0] == "payment-api"


def test_far_away_name_gets_no_suggestion() -> None:
    with pytest.raises(SubjectUnresolved) as err:
        _resolver().resolve("zzzzqqqq")
    assert err.value.detail["suggestions"] == []


def test_colliding_aliases_are_refused() -> None:
    with pytest.raises(InputError, match="collides"):
        alias_table(
            [EntitySpec("payment-api", "service"), EntitySpec("payment_api", "service")], ()
        )


def test_topology_neighbourhood_by_depth_either_direction() -> None:
    topo = Topology([("a", "depends_on", "b"), ("b", "runs_on", "c"), ("d", "depends_on", "a")])
    assert topo.neighbourhood({"a"}, 0) == {"a"}
    assert topo.neighbourhood({"a"}, 1) == {"a", "b", "d"}
    assert topo.neighbourhood({"a"}, 2) == {"a", "b", "c", "d"}
    assert topo.neighbourhood({"unknown"}, 3) == {"unknown"}
