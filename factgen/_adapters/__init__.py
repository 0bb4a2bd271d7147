"""Adapters: real inputs (configuration documents, Prometheus expositions,
CloudEvents) turned into typed facts and events. Each import is atomic: one bad
value rejects the whole input with the attribute, the expected type and the
value, and nothing of it is stored."""

from factgen._adapters._cloudevents import event_type_of, import_cloudevents
from factgen._adapters._common import ImportResult, Skipped, store_observations
from factgen._adapters._config import (
    config_observations,
    flatten_config,
    import_config,
    normalise_prefix,
    unflatten_config,
)
from factgen._adapters._prometheus import (
    MetricRule,
    MetricSample,
    import_prometheus,
    load_prometheus_mapping,
    parse_exposition,
    prometheus_observations,
    sample_number,
)

__all__ = [
    "ImportResult",
    "MetricRule",
    "MetricSample",
    "Skipped",
    "config_observations",
    "event_type_of",
    "flatten_config",
    "import_cloudevents",
    "import_config",
    "import_prometheus",
    "load_prometheus_mapping",
    "normalise_prefix",
    "parse_exposition",
    "prometheus_observations",
    "sample_number",
    "store_observations",
    "unflatten_config",
]
