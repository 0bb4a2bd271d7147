"""The world the door tests (HTTP, MCP) share: a tenant with a schema, an entity,
evidence, and one active precedent, set up through the application layer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import claims
import factgen
from caveat import app as use
from caveat import db
from predicates import ValueType
from tests.conftest import ADMIN

QUERY = "checkout slow, payment api connection pool exhausted"
#: The precedent's request: an episode about payment-api (pool max 20) in case INC-1.
PRECEDENT: dict[str, object] = {
    "kind": "episode",
    "subject": "payment_api",
    "attribute": "restart_restored_service_at",
    "object": "E-1",
    "required": ["config.connection_pool.max eq 20"],
    "evidence": ["E-1"],
    "scope": {"axis": "case", "id": "INC-1"},
    "text": "Payment API pool exhausted at max 20; a restart restored it.",
}


def world(rt: use.Runtime) -> None:
    """The schema (pool max, a configuration), payment-api and evidence E-1."""
    use.declare_schema(
        rt,
        ADMIN,
        [
            factgen.AttributeSpec(
                "config.connection_pool.max", ValueType.parse("int"), content_type="configuration"
            )
        ],
    )
    use.import_entities(rt, ADMIN, [factgen.EntitySpec("payment-api", "service", ("payment_api",))])
    use.add_evidence(rt, ADMIN, "E-1")


def precedent(rt: use.Runtime) -> int:
    """An active precedent about payment-api (pool max 20), written in case INC-1."""
    use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"])
    written = use.write(rt, ADMIN, claims.ItemWrite.model_validate(PRECEDENT))
    use.promote(rt, ADMIN, written.item_id, to="shadow")
    use.promote(rt, ADMIN, written.item_id, to="active")
    return written.item_id


@contextmanager
def two_tenants(db_url: str) -> Iterator[use.Runtime]:
    """Tenants acme and globex with ``world`` each, as the login role (caveat_app);
    the runtime is acme's, ``for_tenant("globex")`` the other's."""
    engine = db.make_app_engine(db_url)
    runtime = use.Runtime.over(engine, "acme")
    try:
        world(runtime)
        world(runtime.for_tenant("globex"))
        yield runtime
    finally:
        engine.dispose()
