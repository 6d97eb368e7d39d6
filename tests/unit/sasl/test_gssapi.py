"""GSSAPI against a throwaway MIT KDC realm (k5test + Debian's krb5-kdc): the
gateway's keytab, users with tickets, and real client-side GSS exchanges in
process — written from RFC 4752, and kafka-python's and aiokafka's own GSSAPI
clients. Missing krb5 tools make these tests fail, never skip.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import gssapi
import pytest
from aiokafka.conn import SaslGSSAPIAuthenticator
from k5test import K5Realm
from kafka.net.sasl.gssapi import SaslMechanismGSSAPI

from gateway.sasl import SaslServer, Step
from gateway.sasl.kerberos import GssapiMechanism, KerberosAcceptor, KerberosSetupError
from gateway.sasl.settings import KerberosConfig, SaslConfig
from tests.loopback import KDC_ON_LOOPBACK, bound_addresses
from tests.redis_server import free_port

REALM = "KGW.TEST"
SERVICE = f"kafka/localhost@{REALM}"
TOOLS = {
    "kdb5_util": "/usr/sbin/kdb5_util",
    "krb5kdc": "/usr/sbin/krb5kdc",
    "kadmin.local": "/usr/sbin/kadmin.local",
    "kinit": "/usr/bin/kinit",
}


class Kdc:
    def __init__(self, realm: K5Realm) -> None:
        self.realm = realm
        self.dir = Path(realm.tmpdir)
        self.keytab = self.dir / "kafka.keytab"

    def user(self, name: str, password: str) -> None:
        self.realm.addprinc(f"{name}@{REALM}", password)

    def ticket(self, name: str, password: str, lifetime: str = "10m") -> gssapi.Credentials:
        """Client credentials from a fresh ccache (kinit -l lifetime)."""
        ccache = self.dir / f"cc-{name.replace('/', '_')}-{time.monotonic_ns()}"
        self.realm.kinit(
            f"{name}@{REALM}", password, flags=["-l", lifetime, "-c", str(ccache)], verbose=False
        )
        return gssapi.Credentials(usage="initiate", store={"ccache": f"FILE:{ccache}"})


@pytest.fixture(scope="module")
def kdc() -> Iterator[Kdc]:
    missing = [
        tool for tool, path in TOOLS.items() if not (shutil.which(tool) or Path(path).exists())
    ]
    if missing:
        raise RuntimeError(f"krb5 tools missing (Debian krb5-kdc, krb5-user): {missing}")
    saved = dict(os.environ)
    realm = K5Realm(
        realm=REALM,
        portbase=free_port(),
        krb5_conf={
            "libdefaults": {"dns_canonicalize_hostname": "false", "rdns": "false", "clockskew": "1"}
        },
        kdc_conf=KDC_ON_LOOPBACK,
        create_host=False,
        get_creds=False,
    )
    try:
        server = Kdc(realm)
        realm.addprinc(SERVICE)
        realm.extract_keytab(SERVICE, str(server.keytab))
        realm.addprinc(f"other/localhost@{REALM}")
        server.user("alice", "alice-pw")
        server.user("svc/batch", "svc-pw")
        os.environ.update(realm.env)  # krb5.conf of the realm, for client and acceptor
        yield server
    finally:
        realm.stop()
        shutil.rmtree(realm.tmpdir, ignore_errors=True)
        os.environ.clear()
        os.environ.update(saved)


def test_the_kdc_listens_on_loopback_only(kdc: Kdc) -> None:
    addresses = bound_addresses(port=kdc.realm.portbase)
    assert addresses, "the KDC is not listening on its port"
    assert all(address.is_loopback for address in addresses), addresses


def acceptor(kdc: Kdc, rules: list[str] | None = None) -> KerberosAcceptor:
    config = KerberosConfig(
        keytab=kdc.keytab,
        service_principal=SERVICE,
        principal_to_local_rules=rules or ["DEFAULT"],
    )
    return KerberosAcceptor(config)


def client_context(
    creds: gssapi.Credentials, service: str = "kafka@localhost"
) -> gssapi.SecurityContext:
    name = gssapi.Name(service, gssapi.NameType.hostbased_service)
    return gssapi.SecurityContext(name=name, creds=creds, usage="initiate")


async def rfc4752_client(
    mechanism: GssapiMechanism, ctx: gssapi.SecurityContext, layer: int = 1
) -> tuple[list[Step], bytes]:
    """The Java client's sequence: AP-REQ; empty after AP-REP; wrapped layer choice."""
    steps = []
    token = ctx.step(None)
    step = await mechanism.step(token)
    steps.append(step)
    while not ctx.complete:
        assert step.challenge is not None and not step.done
        token = ctx.step(step.challenge) or b""
        step = await mechanism.step(token)
        steps.append(step)
    if step.done:
        return steps, b""
    assert step.challenge is not None
    offer = ctx.unwrap(step.challenge).message
    reply = ctx.wrap(bytes([layer]) + offer[1:4] + b"", False).message  # empty authzid
    steps.append(await mechanism.step(reply))
    return steps, offer


async def test_exchange_as_kafka_clients_do_it(kdc: Kdc) -> None:
    creds = kdc.ticket("alice", "alice-pw", lifetime="10m")
    mechanism = acceptor(kdc).start()
    steps, offer = await rfc4752_client(mechanism, client_context(creds))
    ap_rep, layer_offer, final = steps
    assert not ap_rep.done and ap_rep.challenge  # mutual authentication
    assert ap_rep.claimed == f"alice@{REALM}"
    assert not layer_offer.done
    assert offer == bytes([1]) + (65536).to_bytes(3, "big")  # no security layer, like Kafka
    assert final.succeeded and final.challenge == b""
    assert final.principal == "User:alice" and final.claimed == f"alice@{REALM}"
    assert final.session_lifetime_ms is not None
    assert 500_000 < final.session_lifetime_ms <= 601_000  # the ticket's remaining life


async def test_kafka_python_gssapi_client(kdc: Kdc, monkeypatch: pytest.MonkeyPatch) -> None:
    kdc.ticket("alice", "alice-pw")  # also a default ccache for the client below
    ccache = sorted(kdc.dir.glob("cc-alice-*"))[-1]
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    client = SaslMechanismGSSAPI(sasl_kerberos_service_name="kafka", host="localhost")
    mechanism = acceptor(kdc).start()
    step = None
    while not client.is_done():
        step = await mechanism.step(client.auth_bytes())
        assert step.error is None, step
        client.receive(step.challenge)  # the final empty answer included (SaslAuthenticate)
    assert step is not None and step.succeeded and step.principal == "User:alice"
    assert client.is_authenticated()


async def test_aiokafka_gssapi_client(kdc: Kdc, monkeypatch: pytest.MonkeyPatch) -> None:
    kdc.ticket("alice", "alice-pw")
    ccache = sorted(kdc.dir.glob("cc-alice-*"))[-1]
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    client = SaslGSSAPIAuthenticator(loop=asyncio.get_running_loop(), principal="kafka@localhost")
    mechanism = acceptor(kdc).start()
    server_bytes = None
    step = None
    while (answer := client._step(server_bytes)) is not None:
        payload, _expect_response = answer
        step = await mechanism.step(payload)
        assert step.error is None, step
        server_bytes = step.challenge
    assert step is not None and step.succeeded and step.principal == "User:alice"


async def test_principal_to_local_rules(kdc: Kdc) -> None:
    rules = [r"RULE:[1:$1@$0](.*@KGW\.TEST)s/(.*)@KGW\.TEST/tenant-a.$1/L", "DEFAULT"]
    steps, _ = await rfc4752_client(
        acceptor(kdc, rules).start(), client_context(kdc.ticket("alice", "alice-pw"))
    )
    assert steps[-1].principal == "User:tenant-a.alice"
    steps, _ = await rfc4752_client(
        acceptor(kdc, rules).start(), client_context(kdc.ticket("svc/batch", "svc-pw"))
    )
    assert steps[-1].principal == "User:svc"  # two components: DEFAULT keeps the primary
    only_two = [r"RULE:[2:$1](svc)"]
    steps, _ = await rfc4752_client(
        acceptor(kdc, only_two).start(), client_context(kdc.ticket("alice", "alice-pw"))
    )
    final = steps[-1]
    assert final.done and final.principal is None and final.reason == "no_matching_rule"
    assert final.error == "Authentication failed: Kerberos authentication failed"


async def test_expired_ticket_fails_cleanly(kdc: Kdc) -> None:
    creds = kdc.ticket("alice", "alice-pw", lifetime="2s")
    token = client_context(creds).step(None)  # AP-REQ while the ticket is valid
    await asyncio.sleep(4.5)  # past its end plus the 1 s clock skew allowed
    step = await acceptor(kdc).start().step(token)
    assert step.done and step.principal is None and step.challenge is None
    assert step.reason == "ticket_expired"
    assert step.error == "Authentication failed: Kerberos authentication failed"


async def test_ticket_for_another_service_fails(kdc: Kdc) -> None:
    creds = kdc.ticket("alice", "alice-pw")
    token = client_context(creds, "other@localhost").step(None)
    step = await acceptor(kdc).start().step(token)
    assert step.done and step.principal is None and step.reason == "kerberos_error"


@pytest.mark.parametrize("token", [b"", b"\x60\x82garbage", os.urandom(300)])
async def test_malformed_tokens_fail_cleanly(kdc: Kdc, token: bytes) -> None:
    step = await acceptor(kdc).start().step(token)
    assert step.done and step.principal is None and step.error is not None


async def test_security_layer_other_than_none_is_refused(kdc: Kdc) -> None:
    mechanism = acceptor(kdc).start()
    steps, _ = await rfc4752_client(mechanism, client_context(kdc.ticket("alice", "alice-pw")), 4)
    assert steps[-1].done and steps[-1].principal is None
    assert steps[-1].reason == "gssapi_security_layer"


async def test_a_token_where_an_empty_message_belongs_is_refused(kdc: Kdc) -> None:
    mechanism = acceptor(kdc).start()
    ctx = client_context(kdc.ticket("alice", "alice-pw"))
    first = await mechanism.step(ctx.step(None))
    assert first.challenge
    step = await mechanism.step(b"unexpected")
    assert step.done and step.principal is None and step.reason == "gssapi_unexpected_token"


def test_unusable_keytab_fails_at_start(kdc: Kdc, tmp_path: Path) -> None:
    with pytest.raises(KerberosSetupError, match="cannot read the keytab"):
        KerberosAcceptor(KerberosConfig(keytab=tmp_path / "missing", service_principal=SERVICE))
    with pytest.raises(KerberosSetupError):
        KerberosAcceptor(
            KerberosConfig(keytab=kdc.keytab, service_principal=f"nothere/localhost@{REALM}")
        )


async def test_sasl_server_from_config_offers_gssapi(kdc: Kdc) -> None:
    config = SaslConfig.model_validate(
        {
            "mechanisms": ["GSSAPI"],
            "kerberos": {"keytab": str(kdc.keytab), "service_principal": SERVICE},
        }
    )
    server = SaslServer.from_config(config)
    assert server.mechanisms() == ["GSSAPI"]
    steps, _ = await rfc4752_client(
        server.start("GSSAPI", "10.0.0.1"),  # type: ignore[arg-type]
        client_context(kdc.ticket("alice", "alice-pw")),
    )
    assert steps[-1].principal == "User:alice"
    assert await server.is_still_valid("User:alice", None, "GSSAPI")
    await server.close()


async def test_concurrent_exchanges_share_the_service_credentials(kdc: Kdc) -> None:
    shared = acceptor(kdc)
    creds = kdc.ticket("alice", "alice-pw")
    results = await asyncio.gather(
        *(rfc4752_client(shared.start(), client_context(creds)) for _ in range(12))
    )
    assert [steps[-1].principal for steps, _ in results] == ["User:alice"] * 12
