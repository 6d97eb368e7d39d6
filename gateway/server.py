"""Compatibility: the network layer now lives in :mod:`gateway.runtime`.

The names importers used from here are re-exported unchanged.
"""

from __future__ import annotations

from .runtime.client import ClientConnection
from .runtime.gateway import Gateway
from .runtime.listeners import ListenerSet
from .runtime.steps import LOCAL_WORK_TIMEOUT_S
from .runtime.upstream import (
    DeferredUpstream,
    UpstreamConnection,
    UpstreamLogin,
    UpstreamRefused,
)

__all__ = [
    "LOCAL_WORK_TIMEOUT_S",
    "ClientConnection",
    "DeferredUpstream",
    "Gateway",
    "ListenerSet",
    "UpstreamConnection",
    "UpstreamLogin",
    "UpstreamRefused",
]
