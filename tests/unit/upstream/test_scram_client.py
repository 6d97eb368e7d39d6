"""The gateway's SCRAM client against RFC 7677's SHA-256 example exchange."""

from __future__ import annotations

import pytest

from gateway.upstream.scram_client import ScramClient, UpstreamAuthError, plain_message

# RFC 7677 section 3 (user "user", password "pencil").
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc7677_exchange() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    assert client.first() == b"n,,n=user,r=" + CLIENT_NONCE.encode()
    assert client.final(SERVER_FIRST) == CLIENT_FINAL
    client.verify(SERVER_FINAL)


def test_wrong_server_signature_is_refused() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    client.first()
    client.final(SERVER_FIRST)
    with pytest.raises(UpstreamAuthError, match="signature"):
        client.verify(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")


def test_server_nonce_must_extend_ours() -> None:
    client = ScramClient("SCRAM-SHA-512", "user", "pencil", nonce=CLIENT_NONCE)
    with pytest.raises(UpstreamAuthError, match="nonce"):
        client.final(b"r=somebody-else,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")


def test_plain_message_layout() -> None:
    assert plain_message("gw", "s3") == b"\0gw\0s3"
