"""The gateway's TLS client side, towards the brokers: one reloadable context."""

from __future__ import annotations

from .material import client_material
from .reloader import Reloadable
from .settings import UpstreamTlsConfig


def upstream_context(config: UpstreamTlsConfig) -> Reloadable:
    """The current context for new broker connections (MaterialError if unusable)."""
    return Reloadable(
        "upstream", config.files(), lambda: client_material(config), config.watch_interval_s
    )
