"""Settings, read once at the composition root (pydantic-settings).

Domain packages never read the environment; they are handed what they need.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import platformdirs
from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_home() -> Path:
    return Path(platformdirs.user_data_dir("caveat", appauthor=False))


class Settings(BaseSettings):
    """Where the database is and whom the CLI acts for by default."""

    model_config = SettingsConfigDict(env_prefix="CAVEAT_", extra="ignore")

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "CAVEAT_DATABASE_URL")
    )
    #: A streaming replica of that server (``CAVEAT_REPLICA_URL``, off by default): recall
    #: and the context guard's read go there when it has replayed the tenant's latest
    #: withdrawal and the caller's consistency token (docs/scaling.md). The same user,
    #: password and role as ``DATABASE_URL``'s.
    replica_url: str | None = None
    home: Path = Field(default_factory=_default_home)
    tenant: str = "default"
    #: The dense channel's embedder (``CAVEAT_EMBEDDER``): ``minilm`` (all-MiniLM-L6-v2,
    #: offline, on the CPU), ``hashing`` (deterministic, no model: the test suite's),
    #: or ``none`` (no dense channel: lexical + entity on the same code path).
    embedder: str = "minilm"
    #: The password of the application's login role ``caveat_app`` on a server that
    #: asks for one (``CAVEAT_APP_PASSWORD``); the embedded server needs none.
    app_password: str | None = None
    #: Run as the user of ``DATABASE_URL`` instead of the login role
    #: (``CAVEAT_AS_CONNECTING_USER``), on a server where roles cannot be created.
    as_connecting_user: bool = False
    #: How long a recall with ``refresh`` waits for its sources, in milliseconds
    #: (``CAVEAT_REFRESH_DEADLINE_MS``, default 500): a request's ``refresh_deadline_ms``
    #: overrides it; a source still pulling then is reported as timed out.
    refresh_deadline_ms: int = Field(default=500, ge=1, le=60_000)
    #: The environment variables a source's ``token_env`` may name, comma-separated
    #: (``CAVEAT_SOURCE_ENV``, e.g. ``PROM_TOKEN``): the server's operator allows them,
    #: a tenant's sources.yaml only names one. Default none: a tenant admin must never
    #: make the server send ``DATABASE_URL`` or a cloud key as a bearer token.
    source_env: str = ""
    #: The directory a ``file`` source's paths must resolve under (``CAVEAT_SOURCE_FILES``);
    #: unset, any path the server can read (set it on a server many tenants share).
    source_files: Path | None = None

    #: How often a server verifies each tenant's audit hash chain, in seconds
    #: (``CAVEAT_CHAIN_EVERY``, default an hour): ``caveat_audit_chain_ok`` in /metrics.
    chain_every: float = Field(default=3600.0, gt=0)
    #: Connections each server process keeps open to the primary (``CAVEAT_POOL_SIZE``)
    #: and how many more it may open under a burst (``CAVEAT_POOL_OVERFLOW``); ``caveat
    #: serve --workers N`` lowers both so that N workers fit the server's
    #: ``max_connections`` (docs/scaling.md, "Workers").
    pool_size: int = Field(default=10, ge=1, le=1000)
    pool_overflow: int = Field(default=10, ge=0, le=1000)

    #: The server-side extractor (docs/proposals.md, "The server-side extractor"): any
    #: OpenAI-compatible chat endpoint's base URL (``CAVEAT_EXTRACTOR_URL``, e.g.
    #: ``http://127.0.0.1:8000/v1``; ``/chat/completions`` is appended), its model
    #: (``CAVEAT_EXTRACTOR_MODEL``) and bearer key (``CAVEAT_EXTRACTOR_KEY``; none sent
    #: when unset). Unset URL: ``POST /v1/turns`` is refused (``extractor_not_configured``).
    extractor_url: str | None = None
    extractor_model: str = "default"
    extractor_key: str | None = Field(default=None, repr=False)
    #: Seconds one call may take (``CAVEAT_EXTRACTOR_TIMEOUT``; connect, write, read each).
    extractor_timeout: float = Field(default=60.0, gt=0, le=600)
    #: Calls a turn gets before it is ``failed`` (``CAVEAT_EXTRACTOR_ATTEMPTS``), and the
    #: first back-off in seconds (``CAVEAT_EXTRACTOR_BACKOFF``), doubled after each
    #: failure up to five minutes, jittered by ±25%.
    extractor_attempts: int = Field(default=5, ge=1, le=100)
    extractor_backoff: float = Field(default=2.0, gt=0, le=3600)

    def app_engine_options(self) -> dict[str, Any]:
        """How ``caveat.db.make_app_engine`` logs in and pools, as these settings say."""
        return {
            "password": self.app_password,
            "as_connecting_user": self.as_connecting_user,
            "pool_size": self.pool_size,
            "max_overflow": self.pool_overflow,
        }

    @property
    def pgdata(self) -> Path:
        """The embedded server's data directory."""
        return self.home / "pgdata"

    @property
    def models_dir(self) -> Path:
        """Where model files derived on this machine are cached (the ONNX graph of
        all-MiniLM-L6-v2, exported on first use: docs/retrieval.md)."""
        return self.home / "models"
