"""The encryption filter's settings (the ``config:`` of its ``filters:`` entry),
validated when the filter is built: a bad value stops start-up naming the key."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..kms.settings import KmsConfig

Field_ = Literal["value", "key", "headers"]
Granularity = Literal["record", "batch"]
ANY_TENANT = "*"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PolicyConfig(_Strict):
    """Which topics (cluster-side names, exact or by prefix) of which tenant's producers
    are encrypted, what of each record, and under which KEK (default: the tenant's
    name; ``default`` for connections without a tenant)."""

    tenant: str | None = None  # "*": every tenant; null: connections without one
    topics: list[str] = []
    prefixes: list[str] = []
    fields: list[Field_] = ["value"]
    # record: each record's value (and key/headers per ``fields``) in its own envelope
    # (wire format 1; works on compacted topics). batch: a batch's records, keys and
    # headers in one envelope (wire format 2; far cheaper, hides keys, headers and
    # record sizes; a compacted topic refuses it: its records need a key)
    granularity: Granularity = "record"
    kek: str | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _something(self) -> PolicyConfig:
        if not self.topics and not self.prefixes:
            raise ValueError("a policy names topics or prefixes")
        if "value" not in self.fields:
            raise ValueError("fields must include value")
        if any(not p for p in self.prefixes):
            raise ValueError("an empty prefix would encrypt every topic: name them")
        return self


class DekConfig(_Strict):
    """How long and how often one DEK is used before a new one is made, and how long
    an unwrapped DEK is kept for decryption (the bound on a destroyed KEK's reach)."""

    max_age_seconds: float = Field(default=3600.0, gt=0)
    max_uses: int = Field(default=1_000_000, ge=1, le=2**32)  # GCM random IVs: far below 2^32
    decrypt_cache_seconds: float = Field(default=600.0, ge=0)
    decrypt_cache_entries: int = Field(default=10_000, ge=1)
    # key manager calls run off the event loop, in this many threads; one that takes
    # longer than kms_timeout_seconds fails (the request waiting for it is refused)
    kms_threads: int = Field(default=1, ge=1, le=16)
    kms_timeout_seconds: float = Field(default=10.0, gt=0, le=300)


class EncryptionSettings(_Strict):
    kms: KmsConfig
    dek: DekConfig = DekConfig()
    policies: list[PolicyConfig] = Field(min_length=1)
