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

    def app_engine_options(self) -> dict[str, Any]:
        """How ``caveat.db.make_app_engine`` logs in, as these settings say."""
        return {"password": self.app_password, "as_connecting_user": self.as_connecting_user}

    @property
    def pgdata(self) -> Path:
        """The embedded server's data directory."""
        return self.home / "pgdata"
