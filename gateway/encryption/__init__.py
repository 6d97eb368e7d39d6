"""Record encryption at rest: envelope encryption of Produce records and decryption of
Fetch records by a filter on the chain (``docs/encryption.md``, decision 0033).

Load it with ``filters: [{module: "gateway.encryption:EncryptionFilter", config: …}]``.
"""

from __future__ import annotations

from .filter import EncryptionFilter

__all__ = ["EncryptionFilter"]
