"""A throwaway SoftHSM2 token for development and tests: its own configuration and
token directory, a token initialised with PINs generated here (the user PIN is written
to a 0600 file for the gateway's ``pin_file``; neither PIN is ever logged), and the
``SOFTHSM2_CONF`` environment a process needs to see it.

Needs Debian's ``softhsm2`` (``softhsm2-util`` and ``libsofthsm2.so``).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from ..kms.settings import SOFTHSM2

log = logging.getLogger("kgw.devstack.softhsm")


class SoftHsmError(RuntimeError):
    """SoftHSM2 is missing or its token could not be made."""


class SoftHsm:
    def __init__(self, workdir: Path, token_label: str = "kgw") -> None:
        self.workdir = Path(workdir).resolve()
        self.token_label = token_label
        self.conf = self.workdir / "softhsm2.conf"
        self.pin_file = self.workdir / "user.pin"
        self.library = SOFTHSM2

    @property
    def env(self) -> dict[str, str]:
        return {"SOFTHSM2_CONF": str(self.conf)}

    def start(self) -> SoftHsm:
        tool = shutil.which("softhsm2-util")
        if tool is None or not self.library.exists():
            raise SoftHsmError("SoftHSM2 is not installed: apt-get install softhsm2")
        tokens = self.workdir / "tokens"
        tokens.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            f"directories.tokendir = {tokens}\nobjectstore.backend = file\nlog.level = ERROR\n",
            encoding="utf-8",
        )
        pin = secrets.token_hex(8)
        so_pin = secrets.token_hex(8)
        fd = os.open(self.pin_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(pin)
        argv = [tool, "--init-token", "--free", "--label", self.token_label]
        done = subprocess.run(
            [*argv, "--so-pin", so_pin, "--pin", pin],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:  # its output names no PIN; the command line is not shown
            raise SoftHsmError(f"softhsm2-util --init-token failed: {done.stderr.strip()[:200]}")
        log.info("SoftHSM2 token %r ready in %s", self.token_label, self.workdir)
        return self

    def kms_config(self) -> dict[str, object]:
        """The ``kms:`` settings of the encryption filter for this token."""
        return {
            "backend": "pkcs11",
            "pkcs11": {
                "library": str(self.library),
                "token_label": self.token_label,
                "pin_file": str(self.pin_file),
            },
        }
