"""Redis URLs in the configuration: ``redis://``, ``rediss://`` or ``unix://``, and the
password a URL may take from a file instead of carrying it (``?password_file=PATH``).

A password in the configuration file makes the whole file a secret; a file of its
own can be mounted apart (a Kubernetes Secret next to a ConfigMap, a systemd
credential). The file is read when the configuration is loaded: its first line is
the password, and a file others may read is refused, as a credential file is. The URL
the gateway then connects with carries the password as redis-py's ``password`` query
argument; like every Redis URL it is never logged.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Annotated
from urllib.parse import parse_qsl, urlencode, urlsplit

from pydantic import AfterValidator, Field, ValidationError

PASSWORD_FILE = "password_file"


def with_password_file(url: str) -> str:
    """``url`` with its ``password_file`` read into a ``password`` argument (unchanged
    without one). Raises ``ValueError`` naming the file, never the password."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    files = [value for key, value in query if key == PASSWORD_FILE]
    if not files:
        return url
    if len(files) > 1:
        raise ValueError("give password_file once")
    if parts.password is not None or any(key == "password" for key, _ in query):
        raise ValueError("give the password in the URL or in password_file, not both")
    path = Path(files[0])
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ValueError(f"password_file {path}: cannot read: {reason}") from None
    if mode & (stat.S_IROTH | stat.S_IWOTH):
        raise ValueError(
            f"password_file {path} is accessible by others (mode {stat.S_IMODE(mode):04o}); "
            "chmod o-rwx it"
        )
    lines = text.splitlines()
    password = lines[0].strip() if lines else ""
    if not password:
        raise ValueError(f"password_file {path} is empty")
    kept = [(key, value) for key, value in query if key != PASSWORD_FILE]
    rest = urlencode([*kept, ("password", password)])
    return f"{url.split('?', 1)[0]}?{rest}"  # urlunsplit would drop unix://'s empty host


def url_problem(exc: ValidationError) -> str:
    """What is wrong with a Redis URL given on a command line, without echoing it (it
    may carry a password)."""
    messages = [str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors()]
    if any("should match pattern" in m for m in messages):
        return "must be a redis://, rediss:// or unix:// URL"
    return "; ".join(messages) or "not a usable Redis URL"


RedisUrl = Annotated[
    str, Field(pattern=r"^(redis|rediss|unix)://"), AfterValidator(with_password_file)
]
