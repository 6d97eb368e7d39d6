"""Build the gateway's OCI images without a container registry (``make image``).

A Debian 12 root filesystem from ``debootstrap --variant=minbase`` (cached under
``~/.cache/kgw/image``), Debian's Python 3.11 and libkrb5 installed into it with apt
(a cached base image per package list), the project's wheel built from the checkout
and its dependencies from PyPI installed into ``/opt/kgw`` (a venv without pip), a
non-root user, an SPDX bill of materials of what is installed, and then apt, dpkg and
perl removed. ``buildah`` (vfs storage, chroot isolation) assembles and commits the
image; ``build/`` gets an OCI archive and the SBOM. Decision record 0036.

    python -m gateway.devstack.image [--variant gateway|analytics] [--force]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from . import sbom

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("KGW_CACHE", Path.home() / ".cache" / "kgw")) / "image"
BUILD = ROOT / "build" / "image"
MIRROR = "http://deb.debian.org/debian"
SECURITY = "http://deb.debian.org/debian-security"
SUITE = "bookworm"
UID = 10001
VENV = "/opt/kgw"
STATE_DIR = "/var/lib/kgw"
CONFIG = "/etc/kgw/gateway.yaml"
SBOM_PATH = f"{VENV}/sbom.spdx.json"
REGISTRY = "localhost"
# Removed after installation: the package managers and what only they use.
PURGED = ("apt", "libapt-pkg6.0", "debconf", "perl-base", "adduser", "passwd", "login")
REMOVED_PATHS = (
    "usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/locale",
    "var/cache/apt", "var/cache/debconf", "var/lib/apt", "var/log", "tmp/build",
    "etc/apt", "var/cache/ldconfig",
)  # fmt: skip
ENV = {"BUILDAH_ISOLATION": "chroot"}
STORAGE = ("--storage-driver", "vfs")


@dataclass(frozen=True)
class Variant:
    """One image: its name, the Debian packages and the project's extras it needs."""

    name: str
    apt: tuple[str, ...]
    extras: tuple[str, ...]
    entrypoint: tuple[str, ...]


GATEWAY_APT = ("python3", "libgssapi-krb5-2", "ca-certificates", "tzdata")
VARIANTS = {
    "gateway": Variant(
        "kaas-gateway",
        GATEWAY_APT,
        (),
        (f"{VENV}/bin/kgw", "serve", "--config", CONFIG),
    ),
    "analytics": Variant(
        "kaas-gateway-analytics",
        (*GATEWAY_APT, "openjdk-17-jre-headless"),
        ("analytics",),
        (f"{VENV}/bin/kgw", "analyze"),
    ),
}


def project_version() -> str:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return str(data["project"]["version"])


def git_commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def source_dirty() -> bool:
    """Uncommitted changes in what goes into the wheel."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "gateway", "pyproject.toml"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return bool(done.stdout.strip())


def source_hash() -> str:
    """A digest of what goes into the wheel (``gateway/`` as it is on disk, committed or
    not, and ``pyproject.toml``): an image built from the same source is reused."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
         "--exclude-standard", "--", "gateway", "pyproject.toml"],
        capture_output=True, check=True,
    )  # fmt: skip
    digest = hashlib.sha256()
    for name in sorted(set(done.stdout.decode().split("\0")) - {""}):
        path = ROOT / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def built_source(ref: str) -> str | None:
    """The source digest an image in local storage was built from, if it exists."""
    done = subprocess.run(
        ["buildah", *STORAGE, "inspect", "--type", "image", "--format",
         '{{index .ImageAnnotations "io.kgw.source"}}', ref],
        env={**os.environ, **ENV}, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip() or None if done.returncode == 0 else None


def tags(variant: Variant) -> tuple[str, str]:
    """``(version tag, commit tag)``: what ``make image`` tags the image with."""
    commit = f"{project_version()}-g{git_commit()}" + ("-dirty" if source_dirty() else "")
    return version_tag(variant), f"{REGISTRY}/{variant.name}:{commit}"


def version_tag(variant: Variant) -> str:
    """The tag the Kubernetes manifests name (under the operator's registry)."""
    return f"{REGISTRY}/{variant.name}:{project_version()}"


def archive_path(variant: Variant) -> Path:
    return BUILD / f"{variant.name}-{tags(variant)[1].rsplit(':', 1)[1]}.oci.tar"


def _log(message: str) -> None:
    print(f"image: {message}", file=sys.stderr, flush=True)


def buildah(*args: str, capture: bool = False) -> str:
    """Runs buildah with vfs storage and chroot isolation; its stdout if ``capture``."""
    done = subprocess.run(
        ["buildah", *STORAGE, *args], env={**os.environ, **ENV}, check=True, text=True,
        stdout=subprocess.PIPE if capture else None,
    )  # fmt: skip
    return done.stdout.strip() if capture else ""


def image_exists(ref: str) -> bool:
    done = subprocess.run(
        ["buildah", *STORAGE, "inspect", "--type", "image", ref],
        env={**os.environ, **ENV}, capture_output=True,
    )  # fmt: skip
    return done.returncode == 0


def base_rootfs() -> Path:
    """The debootstrap minbase tarball, made once and cached."""
    tarball = CACHE / f"debootstrap-{SUITE}-minbase.tar"
    if tarball.exists():
        return tarball
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        target = Path(tmp) / "rootfs"
        _log(f"debootstrap --variant=minbase {SUITE} from {MIRROR}")
        subprocess.run(
            ["debootstrap", "--variant=minbase", "--components=main", SUITE, str(target),
             MIRROR], check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        shutil.rmtree(target / "var/cache/apt/archives", ignore_errors=True)
        (target / "var/cache/apt/archives/partial").mkdir(parents=True)
        partial = tarball.with_suffix(".partial")
        subprocess.run(
            ["tar", "--numeric-owner", "--xattrs", "-C", str(target), "-cf", str(partial), "."],
            check=True,
        )  # fmt: skip
        partial.rename(tarball)
    return tarball


def base_image(variant: Variant) -> str:
    """An image with the variant's Debian packages (apt still present), cached by the
    package list and the debootstrap tarball."""
    tarball = base_rootfs()
    key = hashlib.sha256(
        f"{variant.apt}|{tarball.stat().st_mtime_ns}|{SUITE}".encode()
    ).hexdigest()[:16]
    ref = f"{REGISTRY}/kgw-base:{key}"
    if image_exists(ref):
        return ref
    _log(f"base image {ref}: apt-get install {' '.join(variant.apt)}")
    ctr = buildah("from", "--name", f"kgw-base-{key}-{os.getpid()}", "scratch", capture=True)
    try:
        buildah("add", ctr, str(tarball), "/")
        root = Path(buildah("mount", ctr, capture=True))
        (root / "etc/apt/sources.list").write_text(
            f"deb {MIRROR} {SUITE} main\ndeb {MIRROR} {SUITE}-updates main\n"
            f"deb {SECURITY} {SUITE}-security main\n"
        )
        (root / "etc/apt/apt.conf.d/90kgw").write_text(
            'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n'
        )
        script = (
            "export DEBIAN_FRONTEND=noninteractive && apt-get update -qq && "
            "apt-get -y -qq upgrade && "
            f"apt-get install -y -qq {' '.join(variant.apt)} && apt-get clean"
        )
        buildah("run", ctr, "--", "sh", "-c", script)
        buildah("commit", "--quiet", ctr, ref)
    finally:
        buildah("rm", ctr)
    return ref


def build_wheels(variant: Variant, into: Path) -> tuple[Path, str]:
    """The project's wheel (from the checkout) and its dependencies' from PyPI (built
    here when PyPI has no binary one, as for gssapi) in ``into``, plus pip's own wheel
    (run from the wheel, never installed). Returns (pip wheel, requirement). The image's
    pip resolves again with the image's Python (environment markers differ between
    3.11.x releases: redis needs async-timeout below 3.11.3) and takes what only that
    Python needs from PyPI, binary wheels only: the image has no compiler."""
    shutil.rmtree(into, ignore_errors=True)
    (into / "tools").mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    extras = f"[{','.join(variant.extras)}]" if variant.extras else ""
    requirement = f"kaas-gateway{extras}"
    _log("pip wheel: the project and its dependencies")
    subprocess.run([*pip, "wheel", "-q", "--wheel-dir", str(into), f"{ROOT}{extras}"], check=True)
    subprocess.run(
        [*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(into / "tools"),
         "pip"],
        check=True,
    )  # fmt: skip
    (wheel,) = (into / "tools").glob("pip-*.whl")
    return wheel, requirement


def certifi_bundle() -> Path:
    """The CA bundle this machine's pip trusts (a proxy's CA may be in it), for the
    image's pip while it installs; never left in the image."""
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                      "/etc/ssl/certs/ca-certificates.crt"):  # fmt: skip
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise RuntimeError("no CA bundle for pip (set PIP_CERT)")


def _purge_dpkg(root: Path) -> None:
    """dpkg cannot remove itself: delete its files and its entry in the status file, so
    that the status file (kept for scanners and the SBOM) lists what is there."""
    info = root / "var/lib/dpkg/info"
    inside = os.path.realpath(root)
    for line in (info / "dpkg.list").read_text().splitlines():
        path = root / line.lstrip("/")
        if path.is_dir():  # also /lib etc., symbolic links to directories (merged /usr)
            continue
        parent = os.path.realpath(path.parent)  # never follow a link out of the image
        if parent.startswith(inside + os.sep) and (path.is_file() or path.is_symlink()):
            path.unlink()
    for leftover in info.glob("dpkg.*"):
        leftover.unlink()
    status = root / "var/lib/dpkg/status"
    stanzas = status.read_text().split("\n\n")
    kept = [s for s in stanzas if s.strip() and not s.startswith("Package: dpkg\n")]
    status.write_text("\n\n".join(kept) + "\n")
    for name in ("status-old", "available", "diversions-old", "lock", "lock-frontend"):
        (root / "var/lib/dpkg" / name).unlink(missing_ok=True)


def _slim(root: Path) -> None:
    for relative in REMOVED_PATHS:
        target = root / relative
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
            if relative in ("var/log", "var/cache/apt"):
                target.mkdir(parents=True)
    doc = root / "usr/share/doc"
    for path in doc.rglob("*"):  # the copyright files stay (licences)
        if path.is_file() and path.name != "copyright":
            path.unlink()


def _add_user(root: Path) -> None:
    with (root / "etc/passwd").open("a") as passwd:
        passwd.write(f"kgw:x:{UID}:{UID}:KaaS gateway:{STATE_DIR}:/usr/sbin/nologin\n")
    with (root / "etc/group").open("a") as group:
        group.write(f"kgw:x:{UID}:\n")
    state = root / STATE_DIR.lstrip("/")
    state.mkdir(parents=True, exist_ok=True)
    os.chown(state, UID, UID)
    (root / "etc/kgw").mkdir(exist_ok=True)


def inventory(ctr: str) -> list[sbom.Component]:
    """What the image's Python says is installed, and the Debian status file."""
    out = buildah("run", ctr, "--", f"{VENV}/bin/python", "-c", sbom.PYTHON_INVENTORY,
                  capture=True)  # fmt: skip
    pairs = [(str(n), str(v)) for n, v in json.loads(out)]
    root = Path(buildah("mount", ctr, capture=True))
    debs = sbom.installed_debs((root / "var/lib/dpkg/status").read_text())
    return [*sbom.python_components(pairs), *debs]


def du_bytes(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                total += os.lstat(path).st_size
    return total


def build(variant: Variant, force: bool = False) -> tuple[str, Path]:
    """Builds the image, or reuses the one of this commit tag built from the same
    source; returns its commit tag and the OCI archive."""
    started = time.monotonic()
    version_tag, commit_tag = tags(variant)
    archive = archive_path(variant)
    source = source_hash()
    if not force and archive.exists() and built_source(commit_tag) == source:
        _log(f"{commit_tag} already built from this source ({archive})")
        return commit_tag, archive
    base = base_image(variant)
    wheels = BUILD / f"wheels-{variant.name}"
    ctr = buildah("from", "--name", f"kgw-build-{os.getpid()}", base, capture=True)
    try:
        pip_wheel, requirement = build_wheels(variant, wheels)
        root = Path(buildah("mount", ctr, capture=True))
        shutil.copytree(wheels, root / "tmp/build")
        shutil.copy(certifi_bundle(), root / "tmp/build/ca.pem")  # removed with tmp/build
        buildah("run", ctr, "--", "python3", "-m", "venv", "--without-pip", VENV)
        buildah(
            "run", ctr, "--", f"{VENV}/bin/python", f"/tmp/build/tools/{pip_wheel.name}/pip",
            "install", "-q", "--no-cache-dir", "--disable-pip-version-check", "--cert",
            "/tmp/build/ca.pem", "--only-binary=:all:", "--find-links", "/tmp/build",
            requirement,
        )  # fmt: skip
        purge = f"dpkg --purge --force-remove-essential --force-depends {' '.join(PURGED)}"
        buildah("run", ctr, "--", "sh", "-c", f"{purge} >/dev/null 2>&1")
        _purge_dpkg(root)
        _slim(root)
        _add_user(root)
        image = commit_tag.rsplit("/", 1)[1]
        document = sbom.spdx_document(image, inventory(ctr))
        text = json.dumps(document, indent=1, sort_keys=True) + "\n"
        (root / SBOM_PATH.lstrip("/")).write_text(text)
        sbom_file = sbom_path(archive)
        sbom_file.write_text(text)
        unpacked = du_bytes(root)
        _configure(ctr, variant, source)
        buildah("unmount", ctr)
        buildah("commit", "--quiet", "--squash", "--rm", ctr, commit_tag)
        ctr = ""
    finally:
        if ctr:
            buildah("rm", ctr)
    buildah("tag", commit_tag, version_tag)
    archive.unlink(missing_ok=True)
    buildah("push", "--quiet", commit_tag, f"oci-archive:{archive}:{commit_tag}")
    shutil.rmtree(wheels, ignore_errors=True)
    _prune(variant, commit_tag, archive)
    took = time.monotonic() - started
    _log(
        f"built {commit_tag} (also {version_tag}) in {took:.0f}s: unpacked "
        f"{unpacked / 1e6:.1f} MB, OCI archive {archive.stat().st_size / 1e6:.1f} MB "
        f"({archive}), SBOM {sbom_file}"
    )
    return commit_tag, archive


def _prune(variant: Variant, keep_tag: str, keep_archive: Path) -> None:
    """Earlier commits' images and archives of this variant go (vfs keeps full copies)."""
    version = project_version()
    keep = {keep_archive.name, sbom_path(keep_archive).name}
    for old in BUILD.glob(f"{variant.name}-{version}-g*"):
        if old.name not in keep:
            old.unlink()
    listing = buildah("images", "--format", "{{.Name}}:{{.Tag}}", capture=True)
    for ref in listing.splitlines():
        if ref.startswith(f"{REGISTRY}/{variant.name}:{version}-g") and ref != keep_tag:
            subprocess.run(  # an image a working container still uses stays
                ["buildah", *STORAGE, "rmi", ref], env={**os.environ, **ENV},
                capture_output=True, check=False,
            )  # fmt: skip


def sbom_path(archive: Path) -> Path:
    """The SBOM written next to an OCI archive."""
    return archive.with_name(archive.name.removesuffix(".oci.tar") + ".spdx.json")


def _configure(ctr: str, variant: Variant, source: str) -> None:
    labels = {
        "org.opencontainers.image.title": variant.name,
        "org.opencontainers.image.version": project_version(),
        "org.opencontainers.image.revision": git_commit(),
        "org.opencontainers.image.base.name": f"debian:{SUITE} (debootstrap minbase)",
        "io.kgw.sbom": SBOM_PATH,
    }
    args = ["config", "--user", f"{UID}:{UID}", "--workingdir", STATE_DIR,
            "--entrypoint", json.dumps(list(variant.entrypoint)), "--cmd", "",
            "--env", f"PATH={VENV}/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--env", "PYTHONDONTWRITEBYTECODE=1", "--env", "PYTHONUNBUFFERED=1",
            "--stop-signal", "SIGTERM", "--created-by", "gateway.devstack.image"]  # fmt: skip
    if variant.name == "kaas-gateway":
        for port in ("9092", "9404"):
            args += ["--port", port]
    for key, value in labels.items():
        args += ["--label", f"{key}={value}"]
    args += ["--annotation", f"io.kgw.source={source}"]
    buildah(*args, ctr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.devstack.image")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="gateway")
    parser.add_argument("--force", action="store_true", help="rebuild even if built")
    args = parser.parse_args(argv)
    build(VARIANTS[args.variant], force=args.force)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
