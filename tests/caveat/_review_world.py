"""The world the SME page tests share: a lineage (an active parent, a shadow child, a
case grandchild), a shadow item the SME may not read, a promotion candidate, a
contested key and refused writes, on the door tests' server as ``caveat_app``."""

from __future__ import annotations

from dataclasses import dataclass

import claims
from caveat import app as use
from tests.caveat._doors import precedent
from tests.conftest import ADMIN


@dataclass(frozen=True)
class Review:
    parent: int
    child: int
    grandchild: int
    hidden: int
    candidates: tuple[int, int]
    contested: tuple[int, int]


def _write(rt: use.Runtime, case: str, **fields: object) -> int:
    body = {
        "kind": "fact",
        "subject": "payment-api",
        "attribute": "pool_exhaustion_seen",
        "object": True,
        "required": ["config.connection_pool.max eq 20"],
        "evidence": ["E-1"],
        "scope": {"axis": "case", "id": case},
        **fields,
    }
    result = use.write(rt, ADMIN, claims.ItemWrite.model_validate(body))
    assert result.item_id is not None, result
    return result.item_id


def review_world(rt: use.Runtime) -> Review:
    """Set the world up through the application layer, as the store's operator."""
    parent = precedent(rt)  # active, in INC-1
    for case in ("INC-2", "INC-3", "INC-4", "INC-5", "INC-6"):
        use.open_case(rt, ADMIN, case, subjects=["payment-api"])
    child = _write(
        rt,
        "INC-2",
        attribute="pool_max_too_low",
        derived_from=[parent],
        text="Pool max 20 is too low for checkout peaks.",
    )
    use.promote(rt, ADMIN, child, to="shadow", rationale="seen twice")
    grandchild = _write(
        rt,
        "INC-2",
        attribute="checkout_latency_from_pool",
        derived_from=[child],
        text="Checkout latency follows pool exhaustion.",
    )
    use.add_evidence(rt, ADMIN, "E-secret", readers=["payments-restricted"])
    hidden = _write(
        rt,
        "INC-3",
        attribute="card_vault_timeout",
        evidence=["E-secret"],
        text="Card vault timeouts (restricted).",
    )
    use.promote(rt, ADMIN, hidden, to="shadow")
    # two cases agreeing make a candidate here (the tenant policy's default is three)
    use.policy_set(rt, ADMIN, {"promotion.min_subjects": 2})
    same = {"attribute": "retries_amplify_load", "object": True}
    candidates = (_write(rt, "INC-4", **same), _write(rt, "INC-5", **same))
    contested = (
        _write(rt, "INC-4", attribute="pool_peak_connections", object=40),
        _write(rt, "INC-6", attribute="pool_peak_connections", object=60),
    )
    for subject in ("nobody", "nobody-else"):
        refused = use.write_batch(
            rt,
            ADMIN,
            [
                claims.ItemWrite.model_validate(
                    {
                        "kind": "fact",
                        "subject": subject,
                        "attribute": "x",
                        "object": 1,
                        "evidence": ["E-1"],
                        "scope": {"axis": "case", "id": "INC-2"},
                    }
                )
            ],
        )
        assert refused.outcomes[0].code == "subject_unresolved"
    return Review(parent, child, grandchild, hidden, candidates, contested)


def resolved_incident(rt: use.Runtime, case: str = "pd-Q1") -> tuple[int, int]:
    """A PagerDuty incident about payment-api as its hook delivers it, triggered and then
    resolved without an outcome: case ``case`` stays open waiting for one, having cited
    a tenant-readable item and one only readers of ``E-secret`` may read (``review_world``
    registers it). Returns the two items' ids."""
    pagerduty = use.source_actor("pagerduty")
    opened = use.OpenCase(case, ("payment-api",))
    use.deliver_hook(rt, kind="pagerduty", actor=pagerduty, actions=[opened])
    readable = _write(rt, case, attribute="pool_restart_helped", text="A restart helped.")
    hidden = _write(rt, case, attribute="card_vault_retry", evidence=["E-secret"])
    for item_id in (readable, hidden):
        use.cite(rt, ADMIN, case, item_id, influence="decisive")
    waiting = use.deliver_hook(
        rt, kind="pagerduty", actor=pagerduty, actions=[opened, use.CloseCase(case, None)]
    )
    assert waiting.done[-1] == {"action": "awaiting_outcome", "case": case}, waiting
    return readable, hidden
