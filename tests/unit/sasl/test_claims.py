"""The name a client claims: read before the mechanism runs, bounded and sanitized."""

from __future__ import annotations

import pytest

from gateway.credentials import CredentialStore
from gateway.sasl.base import MAX_CLAIMED_CHARS, clip
from gateway.sasl.claims import claimed_name

from .conftest import sasl_server


@pytest.mark.parametrize(
    ("mechanism", "message", "expected"),
    [
        ("PLAIN", b"\0ak_1\0sk_secret", "ak_1"),
        ("PLAIN", b"ak_1\0ak_1\0sk_secret", "ak_1"),
        ("PLAIN", b"\0\0sk_secret", None),  # no name
        ("PLAIN", b"ak_1\0sk_secret", None),  # two fields: neither is safely the name
        ("PLAIN", b"sk_secret", None),
        ("PLAIN", b"\0a\0b\0c", None),
        ("PLAIN", b"\0ak_\xff\0sk", "ak_\ufffd"),  # an undecodable byte is replaced
        ("SCRAM-SHA-256", b"n,,n=alice,r=abc", "alice"),
        ("SCRAM-SHA-512", b"y,,n=a=2Cb=3Dc,r=abc,ext=1", "a,b=c"),
        ("SCRAM-SHA-256", b"n,a=alice,n=alice,r=abc", "alice"),
        ("SCRAM-SHA-256", b"c=biws,r=abcdef,p=cHJvb2Y=", None),  # client-final claims nothing
        ("SCRAM-SHA-256", b"n,,r=abc", None),
        ("SCRAM-SHA-256", b"n,,n=bad=escape,r=abc", None),
        ("SCRAM-SHA-256", b"garbage", None),
        ("SCRAM-SHA-256", b"n,,n=" + b"x" * 5000 + b",r=a", None),  # over the message bound
        ("GSSAPI", b"\x60\x82anything", None),  # known only once the ticket is accepted
    ],
)
def test_claimed_name(mechanism: str, message: bytes, expected: str | None) -> None:
    assert claimed_name(mechanism, message) == expected


def test_the_plain_password_never_becomes_the_claim() -> None:
    for message in (b"sk_secret", b"\0sk_secret", b"sk_secret\0", b"\0\0sk_secret"):
        claim = claimed_name("PLAIN", message)
        assert claim is None or "sk_secret" not in claim


def test_huge_names_are_bounded() -> None:
    claim = claimed_name("PLAIN", b"\0" + b"k" * 100_000 + b"\0pw")
    assert claim is not None and len(claim) == MAX_CLAIMED_CHARS + 1 and claim.endswith("…")
    scram = claimed_name("SCRAM-SHA-256", b"n,,n=" + b"u" * 4000 + b",r=abc")
    assert scram is not None and len(scram) == MAX_CLAIMED_CHARS + 1


def test_clip_replaces_what_could_break_a_log_line_or_a_terminal() -> None:
    assert clip("ak_1") == "ak_1"
    assert clip("a\nb\rc\x00d\x1b[31me") == "a?b?c?d?[31me"
    assert clip("x\u202ey\u2028z\u200b") == "x?y?z?"  # bidi override, line separator, zwsp
    assert clip("\udcff") == "?"  # a lone surrogate (undecodable input)
    assert clip("élan ünïcode") == "élan ünïcode"


async def test_failed_steps_carry_a_bounded_claim(file_store: CredentialStore) -> None:
    server = sasl_server(file_store)
    huge = "k" * 300  # over PLAIN's 255-byte field limit
    step = await server.start("PLAIN", "h").step(f"\0{huge}\0pw".encode())
    assert step.reason == "plain_too_long" and step.claimed == huge[:MAX_CLAIMED_CHARS] + "…"
    step = await server.start("PLAIN", "h").step(b"\0ak_\xff\nx\0pw")
    assert step.reason == "plain_utf8" and step.claimed == "ak_\ufffd?x"
    step = await server.start("PLAIN", "h").step(b"\0ak_nope\0wrong")
    assert step.reason == "unknown_user" and step.claimed == "ak_nope"
    scram = server.start("SCRAM-SHA-256", "h")
    first = await scram.step(b"n,,n=mallory\x07,r=abcdefgh")
    assert not first.done
    final = await scram.step(b"c=biws,r=wrong,p=" + b"A" * 44)
    assert final.done and final.claimed == "mallory?"  # the failure that is logged: sanitized
    await server.close()
