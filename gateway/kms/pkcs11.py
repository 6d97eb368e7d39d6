"""KEKs in a PKCS#11 token (an HSM; SoftHSM2 in the tests), through python-pkcs11.

A KEK version is an AES-256 secret key object on the token, labelled
``<label_prefix><name>`` with ``CKA_ID`` = its version (u16, big-endian), created
sensitive and not extractable: its value never leaves the token. A DEK is wrapped with
``CKM_AES_KEY_WRAP`` (RFC 3394) inside the token: the gateway's random DEK is put in
the token as a temporary session object, wrapped by the KEK, and the temporary
object destroyed; unwrapping makes a temporary session object whose value is read
back. Disabling clears ``CKA_WRAP`` on every version (unwrap still works); destroying
deletes every version.

One session is opened on first use and reused; a PKCS#11 failure drops it, so the
next operation opens a new one (the token came back) or fails as unavailable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Callable
from typing import Any, TypeVar

import pkcs11
from pkcs11 import Attribute, KeyType, Mechanism, MechanismFlag, ObjectClass

from .api import DEK_SIZE, KekDisabled, KekInfo, KekNotFound, KmsError, KmsUnavailable, WrappedDek
from .settings import Pkcs11Config

log = logging.getLogger("kgw.kms.pkcs11")
T = TypeVar("T")
_TEMPORARY = {
    Attribute.CLASS: ObjectClass.SECRET_KEY,
    Attribute.KEY_TYPE: KeyType.AES,
    Attribute.TOKEN: False,
    Attribute.SENSITIVE: False,
    Attribute.EXTRACTABLE: True,
}


class Pkcs11Kms:
    def __init__(self, config: Pkcs11Config) -> None:
        self.config = config
        self._session: Any = None

    # -- the data path ---------------------------------------------------------------

    def new_dek(self, kek: str) -> WrappedDek:
        def run(session: Any) -> WrappedDek:
            versions = self._versions(session, kek)
            version, key = versions[-1]
            if not key[Attribute.WRAP]:
                raise KekDisabled(f"KEK {kek!r} is disabled")
            dek = os.urandom(DEK_SIZE)
            temporary = session.create_object({**_TEMPORARY, Attribute.VALUE: dek})
            try:
                wrapped = key.wrap_key(temporary, mechanism=Mechanism.AES_KEY_WRAP)
            finally:
                temporary.destroy()
            return WrappedDek(dek, bytes(wrapped), version)

        return self._run("wrap", run)

    def unwrap(self, kek: str, version: int, wrapped: bytes) -> bytes:
        def run(session: Any) -> bytes:
            found = dict(self._versions(session, kek))
            key = found.get(version)
            if key is None:
                raise KekNotFound(f"KEK {kek!r} has no version {version}")
            try:
                dek = key.unwrap_key(
                    ObjectClass.SECRET_KEY,
                    KeyType.AES,
                    wrapped,
                    mechanism=Mechanism.AES_KEY_WRAP,
                    store=False,
                    template={Attribute.SENSITIVE: False, Attribute.EXTRACTABLE: True},
                )
            except pkcs11.exceptions.PKCS11Error as exc:
                raise KmsError(f"KEK {kek!r} v{version} cannot unwrap this DEK") from exc
            try:
                return bytes(dek[Attribute.VALUE])
            finally:
                dek.destroy()

        return self._run("unwrap", run)

    # -- administration --------------------------------------------------------------

    def create(self, kek: str) -> KekInfo:
        def run(session: Any) -> KekInfo:
            if self._objects(session, kek):
                raise KmsError(f"KEK {kek!r} already exists")
            self._generate(session, kek, 1)
            return self._info(session, kek)

        return self._run("create", run)

    def rotate(self, kek: str) -> KekInfo:
        def run(session: Any) -> KekInfo:
            versions = self._versions(session, kek)
            if not versions[-1][1][Attribute.WRAP]:
                raise KekDisabled(f"KEK {kek!r} is disabled: it is not rotated")
            self._generate(session, kek, versions[-1][0] + 1)
            return self._info(session, kek)

        return self._run("rotate", run)

    def disable(self, kek: str) -> KekInfo:
        def run(session: Any) -> KekInfo:
            for _, key in self._versions(session, kek):
                key[Attribute.WRAP] = False
            return self._info(session, kek)

        return self._run("disable", run)

    def destroy(self, kek: str) -> int:
        def run(session: Any) -> int:
            versions = self._versions(session, kek)
            for _, key in versions:
                key.destroy()
            return len(versions)

        return self._run("destroy", run)

    def list_keks(self) -> list[KekInfo]:
        def run(session: Any) -> list[KekInfo]:
            prefix = self.config.label_prefix
            names = sorted(
                {
                    str(o[Attribute.LABEL])[len(prefix) :]
                    for o in session.get_objects({Attribute.CLASS: ObjectClass.SECRET_KEY})
                    if str(o[Attribute.LABEL]).startswith(prefix)
                }
            )
            return [self._info(session, name) for name in names]

        return self._run("list", run)

    def close(self) -> None:
        if self._session is not None:
            with contextlib.suppress(pkcs11.exceptions.PKCS11Error):
                self._session.close()
            self._session = None

    # -- helpers ---------------------------------------------------------------------

    def _run(self, what: str, operation: Callable[[Any], T]) -> T:
        try:
            return operation(self._open())
        except KmsError:
            raise
        except (pkcs11.exceptions.PKCS11Error, OSError, RuntimeError) as exc:
            self.close()
            log.warning(
                "PKCS#11 %s failed: %s",
                what,
                type(exc).__name__,
                extra={"event": "kms_unavailable", "reason": type(exc).__name__},
            )
            raise KmsUnavailable(
                f"PKCS#11 token unavailable ({what}: {type(exc).__name__})"
            ) from None

    def _open(self) -> Any:
        if self._session is None:
            pin = self.config.pin_file.read_text(encoding="utf-8").strip()
            library = pkcs11.lib(str(self.config.library))
            try:
                token = library.get_token(token_label=self.config.token_label)
            except (pkcs11.exceptions.NoSuchToken, pkcs11.exceptions.MultipleTokensReturned):
                raise KmsUnavailable(f"no PKCS#11 token {self.config.token_label!r}") from None
            self._session = token.open(rw=True, user_pin=pin)
        return self._session

    def _objects(self, session: Any, kek: str) -> list[Any]:
        label = self.config.label_prefix + kek
        return list(
            session.get_objects({Attribute.CLASS: ObjectClass.SECRET_KEY, Attribute.LABEL: label})
        )

    def _versions(self, session: Any, kek: str) -> list[tuple[int, Any]]:
        found = []
        for key in self._objects(session, kek):
            ident = bytes(key[Attribute.ID])
            if len(ident) == 2:
                found.append((struct.unpack(">H", ident)[0], key))
        if not found:
            # an absent token looks the same from an open session: ask the module, which
            # fails (-> unavailable) when the token itself is gone
            pkcs11.lib(str(self.config.library)).get_token(token_label=self.config.token_label)
            raise KekNotFound(f"no KEK {kek!r}")
        return sorted(found, key=lambda pair: pair[0])

    def _generate(self, session: Any, kek: str, version: int) -> None:
        session.generate_key(
            KeyType.AES,
            256,
            label=self.config.label_prefix + kek,
            id=struct.pack(">H", version),
            store=True,
            capabilities=MechanismFlag.WRAP | MechanismFlag.UNWRAP,
            template={Attribute.SENSITIVE: True, Attribute.EXTRACTABLE: False},
        )

    def _info(self, session: Any, kek: str) -> KekInfo:
        versions = self._versions(session, kek)
        enabled = bool(versions[-1][1][Attribute.WRAP])
        return KekInfo(kek, tuple(v for v, _ in versions), enabled)
