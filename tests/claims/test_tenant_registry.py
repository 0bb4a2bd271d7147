"""The registry file: what it declares, and each bad file refused with its line and column."""

from __future__ import annotations

from datetime import timedelta

import pytest

import claims
import factgen
import lifecycle
from predicates.errors import DocumentError

REGISTRY = """\
axes:
  - {name: runbook, agent_writable: true}
  - name: region
    entity: true
content_types:
  - name: dashboard
    triggers: [deploy, config_change]
  - name: feature_flag
    triggers: [config_change]
    reach: dependents
    ttl: 2h
"""


def test_a_registry_file_declares_axes_and_content_types_beside_the_builtins() -> None:
    declared = claims.load_registry_yaml(REGISTRY, source="registry.yaml")
    items = declared.items()
    assert items.axis("runbook") == claims.AxisType("runbook", agent_writable=True)
    assert items.axis("region") == claims.AxisType("region", entity=True)
    assert items.axis("case") is not None  # the built-ins stay
    assert {"dashboard", "feature_flag", "configuration"} <= items.content_types
    assert items.writable_axes() == ["agent", "case", "runbook", "session"]
    assert declared.ttls() == {"feature_flag": timedelta(hours=2)}
    # the JSON form the store keeps reads back as the same declarations
    assert claims.DeclaredRegistry.model_validate(declared.to_json(), strict=False) == declared
    assert declared.to_json()["content_types"][1]["ttl"] == 7200.0
    # an empty file declares nothing
    assert claims.load_registry_yaml("") == claims.DeclaredRegistry()


def test_the_reaches_are_the_lifecycles() -> None:
    assert set(claims.REACHES) == {str(r) for r in lifecycle.Reach}


BAD = [
    # (what, text, line, column, in the message)
    ("not a mapping", "- dashboard\n", 1, 1, "expected a mapping with axes: and content_types:"),
    ("an unknown key", "axes: []\ncontent_type: []\n", 2, 1, "unknown key 'content_type'"),
    (
        "an unknown key of an axis",
        "axes:\n  - {name: runbook, writable: true}\n",
        2,
        21,
        "axes[0].writable: unknown key",
    ),
    ("a missing name", "content_types:\n  - triggers: [deploy]\n", 2, 5, "missing required key"),
    ("a bad name", "axes:\n  - name: Run Book\n", 2, 11, "axes[0].name"),
    (
        "an event type that is not one",
        "content_types:\n  - name: dash\n    triggers: [deploy, redeploy]\n",
        3,
        24,
        "content_types[0].triggers[1]",
    ),
    (
        "a reach that is not one",
        "content_types:\n  - name: dash\n    reach: everyone\n",
        3,
        12,
        "content_types[0].reach",
    ),
    (
        "a TTL that is not a duration",
        "content_types:\n  - name: dash\n    ttl: soon\n",
        3,
        10,
        "a duration like 30s, 2m or 1h, not 'soon'",
    ),
    (
        "a TTL of zero",
        "content_types:\n  - name: dash\n    ttl: 0s\n",
        3,
        10,
        "ttl must be longer than zero",
    ),
    (
        "a built-in redeclared",
        "content_types:\n  - name: topology\n",
        2,
        11,
        "'topology' is a built-in content type; it cannot be redeclared",
    ),
    (
        "a built-in axis redeclared",
        "axes:\n  - {name: tenant, agent_writable: true}\n",
        2,
        12,
        "'tenant' is a built-in axis",
    ),
    (
        "a name declared twice",
        "content_types:\n  - name: dash\n  - name: dash\n",
        3,
        11,
        "content type 'dash' is already declared (entry 0)",
    ),
    ("malformed YAML", "axes: [runbook\n", 2, 1, ""),
]


@pytest.mark.parametrize(("what", "text", "line", "column", "says"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_registry_file_is_refused_with_its_line_and_column(
    what: str, text: str, line: int, column: int, says: str
) -> None:
    with pytest.raises(DocumentError) as caught:
        claims.load_registry_yaml(text, source="registry.yaml")
    err = caught.value
    assert (err.detail["line"], err.detail["column"]) == (line, column), err.message
    assert err.detail["source"] == "registry.yaml"
    assert says in err.message


SCHEMA = """\
attributes:
  - {attribute: config.dashboard.version, type: string, content_type: dashboard}
registry:
  content_types:
    - name: dashboard
      triggers: [deploy]
      reach: nowhere
"""


def test_a_schema_files_registry_section_is_read_where_it_stands() -> None:
    good = SCHEMA.replace("      reach: nowhere\n", "")
    [spec] = factgen.load_schema_yaml(good, source="schema.yaml")  # the key is allowed
    assert spec.content_type == "dashboard"
    doc = factgen.load_yaml_document(good, source="schema.yaml")
    declared = claims.registry_of_document(doc, section=True)
    assert [c.name for c in declared.content_types] == ["dashboard"]
    bad = factgen.load_yaml_document(SCHEMA, source="schema.yaml")
    with pytest.raises(DocumentError) as caught:
        claims.registry_of_document(bad, section=True)
    assert (caught.value.detail["line"], caught.value.detail["column"]) == (7, 14)
    assert "registry.content_types[0].reach" in caught.value.message
    twice = SCHEMA.replace("      reach: nowhere\n", "    - name: dashboard\n")
    with pytest.raises(DocumentError) as caught:
        claims.registry_of_document(
            factgen.load_yaml_document(twice, source="schema.yaml"), section=True
        )
    assert caught.value.detail["line"] == 7


def test_the_example_of_docs_claims_loads() -> None:
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "claims.md").read_text()
    section = doc.split("### The registry, from configuration", 1)[1]
    [example] = re.findall(r"```yaml\n(.*?)```", section.split("\n### ", 1)[0], re.S)
    declared = claims.load_registry_yaml(example, source="docs/claims.md")
    assert [a.name for a in declared.axes] == ["runbook", "region"]
    assert declared.ttls() == {"feature_flag": timedelta(hours=1)}
