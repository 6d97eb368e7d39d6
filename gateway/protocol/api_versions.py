"""ApiVersions: the intersection of what the cluster and the gateway support.

The broker's own answer is decoded and cut down to the APIs and versions the
gateway can decode and chooses to advertise. A broker that did not know the
client's ApiVersions version answers in v0 with UNSUPPORTED_VERSION; that
answer is decoded as v0 and passed on, intersected, so the client can retry.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16
from kio.static.protocol import Entity

from .apis import API_VERSIONS, ApiSpec, gateway_apis
from .codec import Data, ProtocolError, decode_response, encode_body
from .framing import frame

Advertised = Callable[[int], ApiSpec | None]


def intersect(response: Entity, advertised: Advertised) -> Entity:
    """Cut an ApiVersions response down to what ``advertised`` allows."""
    kept = []
    entries: tuple[Any, ...] = response.api_keys  # type: ignore[attr-defined]
    for entry in entries:
        spec = advertised(int(entry.api_key))
        if spec is None:
            continue
        low = max(int(entry.min_version), spec.min_version)
        high = min(int(entry.max_version), spec.max_version)
        if low > high:
            continue
        kept.append(dataclasses.replace(entry, min_version=i16(low), max_version=i16(high)))
    return dataclasses.replace(response, api_keys=tuple(kept))


def default_advertised(key: int) -> ApiSpec | None:
    return gateway_apis().get(key)


def rewrite_api_versions(
    data: Data, request_version: int, advertised: Advertised = default_advertised
) -> bytes:
    """The broker's ApiVersions response frame (no size prefix), intersected; unframed."""
    response: Entity
    try:
        response = decode_response(data, API_VERSIONS, request_version)
    except ProtocolError:
        fallback = decode_response(data, API_VERSIONS, 0, ApiVersionsV0)
        if fallback.error_code != ErrorCode.unsupported_version:
            raise
        response = fallback
    narrowed = intersect(response, advertised)
    return bytes(data[:4]) + encode_body(narrowed)


def unsupported_api_versions(correlation_id: int) -> bytes:
    """The gateway's own answer to an ApiVersions version newer than it decodes.

    As Kafka does: a v0 body with UNSUPPORTED_VERSION listing the ApiVersions
    range, so the client retries with a version both sides know.
    """
    spec = gateway_apis()[API_VERSIONS]
    entry = ApiVersionV0(
        api_key=i16(API_VERSIONS),
        min_version=i16(spec.min_version),
        max_version=i16(spec.max_version),
    )
    body = ApiVersionsV0(error_code=ErrorCode.unsupported_version, api_keys=(entry,))
    return frame(struct.pack(">i", correlation_id) + encode_body(body))
