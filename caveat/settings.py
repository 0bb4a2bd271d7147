"""Settings, read once at the composition root (pydantic-settings).

Domain packages never read the environment; they are handed what they need.
"""

from __future__ import annotations

from pathlib import Path

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
    home: Path = Field(default_factory=_default_home)
    tenant: str = "default"

    @property
    def pgdata(self) -> Path:
        """The embedded server's data directory."""
        return self.home / "pgdata"
