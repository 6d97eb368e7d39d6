"""Where each detector draws its line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Where each detector draws the line. Defaults are documented in docs/analytics.md."""

    auth_gap_s: int = 300  # failures this close belong to one burst
    auth_principal_min: int = 12  # failures against one principal in a burst
    auth_address_min: int = 12  # failures from one address in a burst
    spray_gap_s: int = 600
    spray_principals_min: int = 8  # distinct principals one address failed against
    volume_z: float = 8.0  # robust z (median/MAD) of an hour's allowed requests or bytes
    volume_ratio: float = 3.0  # and at least this many times the baseline median
    volume_over_max: float = 1.5  # and this much over the busiest baseline hour
    denied_min: int = 10  # denied requests in an hour
    denied_z: float = 6.0
    denied_over_max: float = 1.5
    probing_topics_min: int = 8  # distinct denied topics in an hour
    probing_over_max: float = 1.5
    unusual_share: float = 0.01  # an hour of day holding under 1% of the baseline's requests
    unusual_min_requests: int = 10
    rare_share: float = 0.005  # a network under 0.5% of the principal's baseline
    rare_address_max: int = 5  # an address with at most this many baseline events is rare
    throttle_gap_s: int = 300
    throttle_min: int = 10  # throttled responses in a storm
    throttle_ms_min: int = 10_000  # total throttle time in a storm
    history_s: int = 86_400  # a principal needs this much history for baseline detectors
    baseline_min_events: int = 50
