"""The key manager's settings (``kms:`` of the encryption filter's configuration)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SOFTHSM2 = Path("/usr/lib/softhsm/libsofthsm2.so")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Pkcs11Config(_Strict):
    """A PKCS#11 token: the module, the token's label, and the user PIN's file (the PIN
    itself is never in the configuration)."""

    library: Path = SOFTHSM2
    token_label: str = Field(min_length=1, max_length=32)
    pin_file: Path
    label_prefix: str = Field(default="kgw-kek:", max_length=32)  # KEK object labels


class FileKmsConfig(_Strict):
    """KEKs in a local file: for development only (the keys sit on the gateway's disk)."""

    path: Path


class KmsConfig(_Strict):
    backend: Literal["pkcs11", "file"]
    pkcs11: Pkcs11Config | None = None
    file: FileKmsConfig | None = None
    # the file backend is refused unless this says, in so many words, it is not production
    allow_development_backend: bool = False

    @model_validator(mode="after")
    def _backend_settings(self) -> KmsConfig:
        if self.backend == "pkcs11" and self.pkcs11 is None:
            raise ValueError("backend pkcs11 needs the pkcs11 section")
        if self.backend == "file":
            if self.file is None:
                raise ValueError("backend file needs the file section")
            if not self.allow_development_backend:
                raise ValueError(
                    "the file key manager keeps keys on the gateway's disk and is for "
                    "development only: use pkcs11, or set allow_development_backend: true"
                )
        return self
