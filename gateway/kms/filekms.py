"""KEKs in a local JSON file, for development only (``allow_development_backend``).

The file (mode 0600) maps each KEK name to ``{"enabled": bool, "versions": {"1":
base64 key, …}}``; DEKs are wrapped with AES key wrap (RFC 3394) as the PKCS#11
backend does. The file is read on every operation, so ``kgw keys`` changes are seen
by a running gateway.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from ..fileutil import write_atomically
from .api import DEK_SIZE, KekDisabled, KekInfo, KekNotFound, KmsError, KmsUnavailable, WrappedDek


class FileKms:
    def __init__(self, path: Path) -> None:
        self.path = path

    def new_dek(self, kek: str) -> WrappedDek:
        entry = self._entry(self._load(), kek)
        if not entry["enabled"]:
            raise KekDisabled(f"KEK {kek!r} is disabled")
        version = max(int(v) for v in entry["versions"])
        dek = os.urandom(DEK_SIZE)
        key = base64.b64decode(entry["versions"][str(version)])
        return WrappedDek(dek, aes_key_wrap(key, dek), version)

    def unwrap(self, kek: str, version: int, wrapped: bytes) -> bytes:
        encoded = self._entry(self._load(), kek)["versions"].get(str(version))
        if encoded is None:
            raise KekNotFound(f"KEK {kek!r} has no version {version}")
        try:
            return aes_key_unwrap(base64.b64decode(encoded), wrapped)
        except InvalidUnwrap:
            raise KmsError(f"KEK {kek!r} v{version} cannot unwrap this DEK") from None

    def create(self, kek: str) -> KekInfo:
        data = self._load()
        if kek in data:
            raise KmsError(f"KEK {kek!r} already exists")
        data[kek] = {"enabled": True, "versions": {"1": _new_key()}}
        self._save(data)
        return _info(kek, data[kek])

    def rotate(self, kek: str) -> KekInfo:
        data = self._load()
        entry = self._entry(data, kek)
        if not entry["enabled"]:
            raise KekDisabled(f"KEK {kek!r} is disabled: it is not rotated")
        entry["versions"][str(max(int(v) for v in entry["versions"]) + 1)] = _new_key()
        self._save(data)
        return _info(kek, entry)

    def disable(self, kek: str) -> KekInfo:
        data = self._load()
        entry = self._entry(data, kek)
        entry["enabled"] = False
        self._save(data)
        return _info(kek, entry)

    def destroy(self, kek: str) -> int:
        data = self._load()
        count = len(self._entry(data, kek)["versions"])
        del data[kek]
        self._save(data)
        return count

    def list_keks(self) -> list[KekInfo]:
        data = self._load()
        return [_info(name, data[name]) for name in sorted(data)]

    def close(self) -> None:
        return None

    def _load(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise KmsUnavailable(f"{self.path}: cannot read: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except ValueError:
            raise KmsUnavailable(f"{self.path}: not a key file") from None
        if not isinstance(data, dict):
            raise KmsUnavailable(f"{self.path}: not a key file")
        return data

    def _save(self, data: dict[str, Any]) -> None:
        write_atomically(self.path, json.dumps(data, indent=1, sort_keys=True), mode=0o600)

    @staticmethod
    def _entry(data: dict[str, Any], kek: str) -> dict[str, Any]:
        entry = data.get(kek)
        if not isinstance(entry, dict):
            raise KekNotFound(f"no KEK {kek!r}")
        return entry


def _new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode("ascii")


def _info(name: str, entry: dict[str, Any]) -> KekInfo:
    versions = tuple(sorted(int(v) for v in entry["versions"]))
    return KekInfo(name, versions, bool(entry["enabled"]))
