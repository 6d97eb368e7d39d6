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
    tenant_storm_principals: int = 3  # storms of this many of a tenant's principals at once
    tenant_events: bool = False  # ... are one tenant-level finding (else none: a busy day)
    history_s: int = 86_400  # a principal needs this much history for baseline detectors
    baseline_min_events: int = 50
    # Evasion-resistant detectors (decision 0031)
    slow_gap_s: int = 21_600  # failed logins against one principal this close are chained
    slow_min: int = 8  # failures from outside the principal's own networks in a chain
    slow_span_s: int = 3_600  # spread over at least this long (shorter is a burst)
    dspray_gap_s: int = 1_800  # failures from unfamiliar addresses this close form one campaign
    dspray_principals_min: int = 6  # distinct principals tried in a campaign
    dspray_addresses_min: int = 5  # distinct unfamiliar addresses
    dspray_networks_min: int = 2  # distinct networks of them
    dspray_per_address_max: int = 4  # an address with more failures stands out on its own
    sustained_hours_min: int = 4  # consecutive hours (one quiet hour may interrupt)
    sustained_hour_ratio: float = 1.8  # each hour at least this times its expected volume
    sustained_ratio: float = 2.5  # the run in total at least this times expected
    sustained_excess_hours: float = 3.0  # and an excess of this many average baseline hours
    sustained_min_requests: int = 60  # fewer requests in the run are too few to judge
    sustained_lookback_s: int = 24 * 3_600  # a run reaching into the window may start this early
    tenant_factor_min: float = 1.5  # peers this much above usual: the tenant rose together
    tenant_peers_min: int = 2  # peers needed to judge a tenant-wide rise
    newp_foreign_min: int = 3  # topics outside its tenant a new principal tried
    newp_over_peers: int = 2  # and this many more than any peer of its tenant
    topic_new_s: int = 86_400  # a topic first used this recently by anyone is new, not lateral
    admin_gap_s: int = 3_600  # destructive admin requests this close form one episode
    admin_ops_min: int = 3  # destructive requests in an episode
    admin_targets_min: int = 2  # or distinct topics or groups they named
