"""The ``tls`` and ``sni`` configuration sections: shape errors name the key path."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.addresses.sni import SniPublicMap
from gateway.addresses.topology import Topology, UnmappableBroker
from gateway.config import ConfigError, parse_config
from gateway.tls.settings import SniConfig

TLS = {"cert_file": "s.pem", "key_file": "s.key"}


def config(listener: dict[str, Any], upstream: dict[str, Any] | None = None) -> dict[str, Any]:
    base = {"name": "l", "bootstrap_port": 9093, "advertised_host": "kafka.test"}
    return {
        "upstream": {"bootstrap_servers": ["10.0.0.1:9092"], **(upstream or {})},
        "listeners": [{**base, **listener}],
    }


def test_tls_listener_defaults() -> None:
    cfg = parse_config(config({"broker_port_base": 9100, "tls": TLS}))
    tls = cfg.listeners[0].tls
    assert tls is not None
    assert tls.min_version == "TLSv1.2" and tls.client_auth == "none"
    assert tls.principal.rules == ["DEFAULT"] and tls.handshake_timeout_s == 10


@pytest.mark.parametrize(
    ("listener", "upstream", "message"),
    [
        ({"broker_port_base": 9100, "tls": {**TLS, "min_version": "TLSv1.1"}}, None,
         "listeners.0.tls.min_version"),
        ({"broker_port_base": 9100, "tls": {**TLS, "client_auth": "required"}}, None,
         "needs at least one client_cas"),
        ({"broker_port_base": 9100, "tls": {**TLS, "client_cas": [
            {"ca_file": "a.pem", "crl_file": "a.crl"}, {"ca_file": "b.pem"}]}}, None,
         "crl_file for every CA or for none"),
        ({"broker_port_base": 9100, "tls": {**TLS, "principal": {"rules": ["RULE:(/x/"]}}},
         None, "listeners.0.tls.principal.rules"),
        ({"broker_port_base": 9100, "tls": {**TLS, "principal": {"source": "san_ip"}}},
         None, "listeners.0.tls.principal.source"),
        ({"broker_port_base": 9100, "tls": {**TLS, "handshake_timeout_s": 0}}, None,
         "listeners.0.tls.handshake_timeout_s"),
        ({"broker_port_base": 9100, "tls": {**TLS, "bogus": 1}}, None, "listeners.0.tls.bogus"),
        ({"sni": {"broker_host": "b{node_id}.kafka.test"}}, None, "sni needs tls"),
        ({"tls": TLS, "sni": {"broker_host": "b{node_id}.kafka.test"}, "broker_port_base": 9100},
         None, "drop broker_port_base"),
        ({"tls": TLS, "sni": {"broker_host": "kafka.test"}}, None, "listeners.0.sni.broker_host"),
        ({"tls": TLS}, None, "broker_port_base is required"),
        ({"broker_port_base": 9100}, {"tls": {"cert_file": "c.pem"}},
         "cert_file and key_file go together"),
    ],
)  # fmt: skip
def test_bad_tls_config_names_key_path(
    listener: dict[str, Any], upstream: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(config(listener, upstream))
    assert message in str(info.value)


def test_sni_listener_has_one_port() -> None:
    cfg = parse_config(config({"tls": TLS, "sni": {"broker_host": "B{node_id}.Kafka.test"}}))
    lst = cfg.listeners[0]
    assert lst.sni is not None and lst.broker_port_base is None
    assert lst.public_port_base == 9093
    public = SniPublicMap(lst, Topology(), lst.sni)
    assert public.public(3) == ("b3.kafka.test", 9093)
    with pytest.raises(UnmappableBroker):
        public.public(1000)


def test_sni_names_route_to_node_ids() -> None:
    sni = SniConfig(broker_host="b{node_id}.kafka.test")
    assert sni.node_id("b1.kafka.test") == 1
    assert sni.node_id("B12.KAFKA.TEST.") == 12
    assert sni.node_id("b.kafka.test") is None
    assert sni.node_id("b01.kafka.test") is None
    assert sni.node_id("b1.kafka.test.evil") is None
    assert sni.node_id("xb1.kafka.test") is None
    assert SniConfig(broker_host="kafka-{node_id}.x.test").node_id("kafka-7.x.test") == 7
