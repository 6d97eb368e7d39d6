"""Key managers for record encryption: the ``Kms`` interface, a PKCS#11 backend and a
development-only file backend (``open_kms`` picks one from the settings)."""

from __future__ import annotations

from .api import KekDisabled, KekInfo, KekNotFound, Kms, KmsError, KmsUnavailable, WrappedDek
from .settings import KmsConfig

__all__ = [
    "KekDisabled",
    "KekInfo",
    "KekNotFound",
    "Kms",
    "KmsConfig",
    "KmsError",
    "KmsUnavailable",
    "WrappedDek",
    "open_kms",
]


def open_kms(config: KmsConfig) -> Kms:
    """The backend the settings name (nothing is opened until the first operation)."""
    if config.backend == "pkcs11":
        from .pkcs11 import Pkcs11Kms

        assert config.pkcs11 is not None
        return Pkcs11Kms(config.pkcs11)
    from .filekms import FileKms

    assert config.file is not None
    return FileKms(config.file.path)
