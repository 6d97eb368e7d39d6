"""Narrowing the TLS 1.3 cipher suites of an ``ssl.SSLContext``.

Python's ``ssl`` (3.11) has ``set_ciphers`` for TLS 1.2 and older only; OpenSSL's
``SSL_CTX_set_ciphersuites`` is not exposed. It is called here through ``ctypes`` on
the context's own ``SSL_CTX``, resolved from the ``_ssl`` extension module (so the
OpenSSL that Python's ``ssl`` is linked against, never another copy). Every step is
checked, and anything unexpected is a ``CipherSuiteError`` at load time, never a
silently wider list:

- the names are checked against the suites OpenSSL defines for TLS 1.3 (OpenSSL
  itself ignores unknown names);
- the ``SSL_CTX`` pointer is confirmed before it is written through: OpenSSL's own
  option bits read through it must equal ``SSLContext.options``;
- afterwards ``SSLContext.get_ciphers()`` must list exactly the requested TLS 1.3
  suites (in that order).
"""

from __future__ import annotations

import ctypes
import ssl
from collections.abc import Sequence

TLS13_SUITES = (
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_128_CCM_SHA256",
    "TLS_AES_128_CCM_8_SHA256",
)
"""Every TLS 1.3 suite OpenSSL defines (RFC 8446, appendix B.4); all are AEAD."""


class CipherSuiteError(Exception):
    """TLS 1.3 suites cannot be set as asked; the message says why."""


def check_names(suites: Sequence[str]) -> list[str]:
    """The names, each one a TLS 1.3 suite; ValueError naming the first that is not."""
    if not suites:
        raise ValueError("give at least one suite (leave the key out for OpenSSL's defaults)")
    for name in suites:
        if name not in TLS13_SUITES:
            raise ValueError(
                f"{name!r} is not a TLS 1.3 cipher suite (one of {', '.join(TLS13_SUITES)})"
            )
    if len(set(suites)) != len(suites):
        raise ValueError("a suite is listed twice")
    return list(suites)


def _libssl() -> ctypes.CDLL:
    import _ssl  # the extension module; dlsym on it also searches the libssl it links

    try:
        lib = ctypes.CDLL(_ssl.__file__)
        set_suites = lib.SSL_CTX_set_ciphersuites
        get_options = lib.SSL_CTX_get_options
    except (OSError, AttributeError) as exc:
        raise CipherSuiteError(
            f"this Python's OpenSSL offers no SSL_CTX_set_ciphersuites ({exc})"
        ) from None
    set_suites.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    set_suites.restype = ctypes.c_int
    get_options.argtypes = [ctypes.c_void_p]
    get_options.restype = ctypes.c_uint64
    return lib


def _ssl_ctx(context: ssl.SSLContext) -> int:
    """The ``SSL_CTX *`` of a context: CPython's ``PySSLContext`` starts with it after
    the object header. Confirmed through OpenSSL before it is used to write."""
    if type(context).__basicsize__ < object.__basicsize__ + ctypes.sizeof(ctypes.c_void_p):
        raise CipherSuiteError("unexpected ssl.SSLContext layout")
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not pointer:
        raise CipherSuiteError("ssl.SSLContext has no OpenSSL context")
    return pointer


def set_tls13_ciphersuites(context: ssl.SSLContext, suites: Sequence[str]) -> None:
    """Allow only ``suites`` (in this order of preference) for TLS 1.3 on ``context``."""
    wanted = check_names(suites)
    if ssl.OPENSSL_VERSION_INFO < (1, 1, 1):
        raise CipherSuiteError(f"{ssl.OPENSSL_VERSION} has no TLS 1.3")
    lib = _libssl()
    pointer = _ssl_ctx(context)
    if lib.SSL_CTX_get_options(pointer) != context.options:
        raise CipherSuiteError("cannot find the OpenSSL context of ssl.SSLContext safely")
    if lib.SSL_CTX_set_ciphersuites(pointer, ":".join(wanted).encode()) != 1:
        raise CipherSuiteError(f"OpenSSL refused the suites {':'.join(wanted)}")
    if tls13_ciphersuites(context) != wanted:
        raise CipherSuiteError(
            f"OpenSSL offers {tls13_ciphersuites(context)} for TLS 1.3, not {wanted}"
        )


def tls13_ciphersuites(context: ssl.SSLContext) -> list[str]:
    """The TLS 1.3 suites a context offers, in its order."""
    return [c["name"] for c in context.get_ciphers() if c.get("protocol") == "TLSv1.3"]
