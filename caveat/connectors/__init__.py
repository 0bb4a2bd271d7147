"""The edge (architecture.md, "The edge: connectors to the outside"): translators that
fetch facts from the systems a team already runs and hand them to the use cases of
``caveat.app``; docs/sources.md describes each kind and what a failure does.

    from caveat import connectors
    connectors.pull_sources(rt, ["prom"])                 # -> [PullOutcome]
    connectors.refresh(rt, [("payment-api", "metrics.pool_utilisation")])
    registry.register(connectors.SourceMetrics())        # the counts, for /metrics

Hooks (docs/hooks.md): ``receive`` authenticates, translates and delivers a webhook;
one translator per sender (``alertmanager``, ``github``, ``cloudevents``,
``pagerduty``).

The server-side extractor (docs/proposals.md): ``ChatExtractor`` asks any
OpenAI-compatible chat-completions endpoint for a turn's proposals.

One module per outside system: ``prometheus``, ``http_json``, ``file``, ``chat``. None writes
SQL or holds a transaction across a network call: each pull fetches first, then makes
one ``store_pull`` call per source.
"""

from caveat.connectors._counters import SourceMetrics, count_pull
from caveat.connectors._hooks import Translation, hook_kind, receive, translators
from caveat.connectors._http import FetchError, Transport
from caveat.connectors._map import AMBIGUOUS, LABEL_MISSING, NOT_FINITE, POINTER_MISSING
from caveat.connectors._pull import RefreshReport, SourceFailure, pull_sources, refresh
from caveat.connectors.chat import ChatExtractor, chat_request

__all__ = [
    "AMBIGUOUS",
    "LABEL_MISSING",
    "NOT_FINITE",
    "POINTER_MISSING",
    "ChatExtractor",
    "FetchError",
    "RefreshReport",
    "SourceFailure",
    "SourceMetrics",
    "Translation",
    "Transport",
    "chat_request",
    "count_pull",
    "hook_kind",
    "pull_sources",
    "receive",
    "refresh",
    "translators",
]
