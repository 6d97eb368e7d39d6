"""gateway/fileutil.py: atomic whole-file writes and the cross-process lock."""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys
from pathlib import Path

from gateway.fileutil import exclusive_lock, write_atomically


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_file_gets_0644_or_the_mode_asked_for(tmp_path: Path) -> None:
    write_atomically(tmp_path / "plain", "a\n")
    write_atomically(tmp_path / "secret", "b\n", mode=0o600)
    assert (tmp_path / "plain").read_text() == "a\n" and _mode(tmp_path / "plain") == 0o644
    assert (tmp_path / "secret").read_text() == "b\n" and _mode(tmp_path / "secret") == 0o600


def test_existing_file_keeps_its_mode_and_no_temporary_is_left(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("old")
    os.chmod(path, 0o640)
    write_atomically(path, "new")
    assert path.read_text() == "new" and _mode(path) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_failed_write_leaves_the_old_content_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("old")
    try:
        write_atomically(path, "\ud800")  # not encodable: fails half way
    except UnicodeEncodeError:
        pass
    else:
        raise AssertionError("the write should have failed")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_lock_excludes_another_process(tmp_path: Path) -> None:
    lock = tmp_path / "sub" / ".lock"
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n"
        "    sys.exit(3)\nsys.exit(0)\n"
    )

    def other_process_gets_it() -> bool:
        code = subprocess.run([sys.executable, "-c", probe, str(lock)], check=False).returncode
        assert code in (0, 3)
        return code == 0

    with exclusive_lock(lock):
        assert _mode(lock) == 0o600
        assert not other_process_gets_it()
    assert other_process_gets_it()
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_lock_that_cannot_be_taken_raises_the_callers_error(tmp_path: Path) -> None:
    class StoreProblem(Exception):
        pass

    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the lock's directory should be
    try:
        with exclusive_lock(blocker / ".lock", StoreProblem):
            raise AssertionError("the lock should not have been taken")
    except StoreProblem as exc:
        assert str(exc).startswith(f"cannot lock {blocker / '.lock'}: ")
