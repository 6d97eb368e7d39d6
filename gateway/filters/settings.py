"""The ``filters:`` section: operators' filters, in the order requests meet them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class FilterConfig(BaseModel):
    """One filter: where its factory is, and the settings handed to it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    # "package.module:factory" (a class or function called with ``config``)
    module: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    entry_point: str | None = Field(default=None, min_length=1)  # group "kgw.filters"
    config: dict[str, Any] = {}

    @model_validator(mode="after")
    def _one_source(self) -> FilterConfig:
        if (self.module is None) == (self.entry_point is None):
            raise ValueError("give exactly one of module or entry_point")
        return self
