"""Every data-changing public function of factgen, claims, lifecycle and recall takes
the actor (issue 11), so a permission cannot be skipped by calling the domain directly.

A function counts as data-changing when it takes a ``session``/``sessions`` and is not
a read. The few that change data without an actor are listed below, each with why;
the list is pinned, so a new function without an actor fails this test until it takes
one or is added here with its reason. ``factgen`` sits left of ``claims`` and knows no
actor: its mutators are checked in the application layer (``caveat.app``), which the
second test proves for every door-facing factgen use case.
"""

from __future__ import annotations

import inspect

import pytest
import sqlalchemy as sa

import claims
import factgen
import factgen._access
import lifecycle
import recall
from caveat import app as use
from predicates.errors import Forbidden

#: Reads: they change nothing.
READS = {
    "factgen.build_snapshot",
    "factgen.check_predicate",
    "factgen.events_between",
    "factgen.load_world",
    "claims.get_actor",
    "claims.principal_team",
    "claims.get_items",
    "claims.verify_chain",
    "claims.authenticate",
    "lifecycle.get_case",
    "lifecycle.is_contested",
    "recall.queue_depth",
    "factgen.loaded_sources",
    "factgen.source_status",
    "claims.loaded_registry",
    "factgen.check_levels_kept",
    "factgen.current_policy",
    "factgen.policy_as_of",
    "lifecycle.enforcement_of",
    "lifecycle.tenant_confidence",
    # the turn queue's reads: the application layer checks the caller (and scopes a
    # non-admin to its own turns) before these; turn_actor narrows, never widens
    "claims.get_turn",
    "claims.list_turns",
    "claims.turn_counts",
    "claims.turn_actor",
}
#: Data-changing without an actor, on purpose.
SYSTEM = {
    # the audit primitive: every caller is a function that checked its actor
    "claims.append_many": "the audit log's append, called by checked actions",
    "claims.erase_details": "an erasure's removal of audit details: lifecycle.forget's",
    # recording what a checked recall or guard returned (recall.record_use checks)
    "lifecycle.enter_context": "called by recall.record_use / record_context",
    "lifecycle.log_shadow": "called by recall.record_use",
    "lifecycle.record_use": "called by recall.record_use",
    # time and the embedding queue: system jobs (caveat.app.sweep requires sweep)
    "lifecycle.sweep": "the periodic sweep; caveat.app.sweep requires its actor",
    "recall.embed_pending": "the embedding queue's drain (derived data only)",
    "recall.enqueue_missing": "the embedding queue's backfill (derived data only)",
    "recall.embed_passages": "knowledge passages' vectors (derived data only)",
    # the edge's bookkeeping, beside a checked action in the same transaction
    "factgen.record_pull": "a pull's counts, beside observe_each (which checks observe)",
    "factgen.claim_delivery": "a hook's delivery id, before actions that check their actor",
    "factgen.settle_delivery": "what a delivery did, after actions that checked their actor",
    # tenant policy: lifecycle.set_policy checks its actor (admin) around these
    "factgen.lock_policy": "the tenant row's lock for a checked policy change",
    "factgen.store_policy": "a policy version, stored by lifecycle.set_policy",
    "lifecycle.auto_promote": "promotion.auto_apply, the policy as the actor, after a close",
    # the extractor's queue: submit_turn checks its actor; the worker leases and settles
    # the turn, and consolidates its proposals as turn_actor (the gate checks that actor)
    "claims.claim_due_turns": "the extractor worker's lease on due turns (an attempt)",
    "claims.settle_turn": "where a leased turn stands, after the worker's checked writes",
}


def _public(module: object) -> list[tuple[str, inspect.Signature]]:
    out = []
    for name in module.__all__:  # type: ignore[attr-defined]
        obj = getattr(module, name)
        if inspect.isfunction(obj):
            out.append((f"{module.__name__}.{name}", inspect.signature(obj)))  # type: ignore[attr-defined]
    return out


def test_every_data_changing_domain_function_takes_the_actor() -> None:
    lacking = {
        name
        for module in (factgen, claims, lifecycle, recall)
        for name, sig in _public(module)
        if {"session", "sessions"} & set(sig.parameters) and "actor" not in sig.parameters
    }
    assert lacking == READS | set(SYSTEM)


@pytest.mark.parametrize(
    ("call", "needs"),
    [
        (lambda rt, a: use.observe(rt, a, []), "observe"),
        (lambda rt, a: use.record_event(rt, a, type="deploy", subjects=[]), "event"),
        (lambda rt, a: use.declare_schema(rt, a, []), "schema"),
        (lambda rt, a: use.import_entities(rt, a, []), "entities"),
        (lambda rt, a: use.register_principal(rt, a, "p", role="agent"), "policy"),
        (use.sweep, "sweep"),
        (lambda rt, a: use.create_token(rt, a, "p", role="agent"), "tokens"),
    ],
)
def test_the_layer_checks_what_factgen_cannot(
    db_url: str, monkeypatch: pytest.MonkeyPatch, call: object, needs: str
) -> None:
    """An actor whose role lacks the action is refused before anything is written."""
    monkeypatch.setenv("DATABASE_URL", db_url)
    nobody = claims.Actor("almighty", "admin", frozenset())  # has every action but one
    stripped = {role: frozenset(a - {needs}) for role, a in claims.ROLE_ACTIONS.items()}
    with use.serving("acme", None) as (rt, admin):
        use.declare_tenant(rt, admin)
        before = _counts(db_url)
        monkeypatch.setattr(factgen._access, "ROLE_ACTIONS", stripped)
        with pytest.raises(Forbidden, match=needs.replace("_", " ")):
            call(rt, nobody)  # type: ignore[operator]
    assert _counts(db_url) == before  # refused before anything was written


def _counts(db_url: str) -> dict[str, int]:
    from caveat import db

    tables = ("tenants", "principals", "fact_schema", "entities", "facts", "events")
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as c:
            return {t: c.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in tables}
    finally:
        engine.dispose()
