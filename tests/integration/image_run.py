"""Run programs from the gateway's container image the way a container runtime would,
without one: a working container's root (``buildah from`` + ``buildah mount``) bound
read-only in a private mount namespace, with /proc, a /dev of four devices, a tmpfs
/tmp and the volumes bound over it, entered with ``chroot`` as the image's user. The
network is the host's: the gateway reaches the test cluster on loopback."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from gateway.devstack import image

BUILDAH = ["buildah", *image.STORAGE]


def build_image() -> str:
    """The gateway image of this checkout (built, or reused for a clean tree whose
    commit was built): its commit tag."""
    tag, _ = image.build(image.VARIANTS["gateway"])
    return tag


def _buildah(*args: str) -> str:
    done = subprocess.run(
        [*BUILDAH, *args], capture_output=True, text=True, check=True, timeout=600,
        env={**os.environ, **image.ENV},
    )  # fmt: skip
    return done.stdout.strip()


def snapshot(root: Path) -> dict[str, tuple[int, ...]]:
    """Every path under ``root`` with its mode, owner, size, mtime and ctime."""
    found = {}
    for dirpath, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            found[os.path.relpath(path, root)] = (
                st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
            )  # fmt: skip
    return found


class ImageRoot:
    """A working container of ``ref`` and a way to run its programs read-only."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.container = _buildah("from", "--pull-never", ref)
        self.root = Path(_buildah("mount", self.container))
        self.config: dict[str, Any] = json.loads(_buildah("inspect", "--type", "image", ref))[
            "OCIv1"
        ]["config"]

    @property
    def user(self) -> str:
        return str(self.config["User"])

    def command(
        self, argv: list[str], volumes: dict[str, Path] | None = None,
        ro_volumes: dict[str, Path] | None = None,
    ) -> list[str]:  # fmt: skip
        """``argv`` run inside the image as its user, its root read-only."""
        root = shlex.quote(str(self.root))
        lines = [
            "set -e",
            f"mount --bind {root} {root}",
            f"mount -o remount,bind,ro {root}",
            f"mount -t proc proc {root}/proc",
            f"mount -t tmpfs -o mode=755,size=1m tmpfs {root}/dev",
            f"mount -t tmpfs -o mode=1777,size=64m tmpfs {root}/tmp",
        ]
        for device in ("null", "zero", "random", "urandom"):
            lines += [f": > {root}/dev/{device}", f"mount --bind /dev/{device} {root}/dev/{device}"]
        for inside, host in {**(volumes or {}), **(ro_volumes or {})}.items():
            target = f"{root}{shlex.quote(inside)}"
            lines.append(f"mount --bind {shlex.quote(str(host))} {target}")
            if inside in (ro_volumes or {}):
                lines.append(f"mount -o remount,bind,ro {target}")
        workdir = self.config.get("WorkingDir") or "/"
        inner = ["/usr/bin/env", f"--chdir={workdir}", *argv]
        lines.append(
            f"exec chroot --userspec={shlex.quote(self.user)} {root} "
            + " ".join(shlex.quote(a) for a in inner)
        )
        # unshare and sh exec: the process started is the program itself
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines)]

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(argv), capture_output=True, text=True, timeout=120, **kwargs
        )

    def close(self) -> None:
        subprocess.run([*BUILDAH, "umount", self.container], capture_output=True, timeout=120)
        subprocess.run([*BUILDAH, "rm", self.container], capture_output=True, timeout=300)


def process_ids(pid: int) -> tuple[list[int], list[int]]:
    """(real, effective, saved, fs) uids and gids of a running process."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = [int(v) for v in value.split()] if key in ("Uid", "Gid") else []
    return fields["Uid"], fields["Gid"]
