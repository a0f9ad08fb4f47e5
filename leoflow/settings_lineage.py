"""The ``lineage:`` settings: where OpenLineage events go (leoflow/scheduler/lineage.py).

Off by default. ``transport: http`` POSTs each event to ``url`` + ``endpoint`` (Marquez's
``api/v1/lineage`` unless told), with ``Authorization: Bearer <key>`` when an API key is
named: ``api_key_secret`` (a secret of the secrets backend) or ``api_key_env`` (an
environment variable of the scheduler's process), never the key itself in a file.
``console`` logs each event as one JSON line (logger ``leoflow.lineage``); ``file``
appends it to ``file`` as one JSON line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class LineageSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)

    transport: Literal["none", "http", "console", "file"] = "none"
    # The job namespace of every event (and the dataset namespace of plain asset names).
    namespace: str = Field("leoflow", min_length=1, max_length=200)
    url: str | None = None
    endpoint: str = "api/v1/lineage"
    api_key_secret: str | None = None
    api_key_env: str | None = None
    file: Path | None = None
    timeout: float = Field(5.0, gt=0, le=300)
    # Tries per event (the first included), the wait before the second doubling after.
    attempts: int = Field(3, ge=1, le=20)
    backoff: float = Field(0.5, ge=0, le=60)
    # Events waiting to be sent; past it the oldest waiting one is dropped (counted).
    queue_size: int = Field(10_000, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _check_transport(self) -> LineageSettings:
        url = self.url or ""
        if self.transport == "http" and not url.startswith(("http://", "https://")):
            raise ValueError("lineage.url: transport http needs an http:// or https:// URL")
        if self.transport == "file" and self.file is None:
            raise ValueError("lineage.file: transport file needs the path of a file to append to")
        if self.api_key_secret and self.api_key_env:
            raise ValueError("lineage: set api_key_secret or api_key_env, not both")
        return self
