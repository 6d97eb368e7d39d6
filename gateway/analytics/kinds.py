"""The detectors' names and what each finding means, in words for a security admin."""

from __future__ import annotations

AUTH_BURST_PRINCIPAL = "auth_failure_burst_principal"
AUTH_BURST_ADDRESS = "auth_failure_burst_address"
SPRAYING = "password_spraying"
NEW_ADDRESS = "new_client_address"
VOLUME_SPIKE = "volume_spike"
DENIED_SPIKE = "denied_spike"
PROBING = "topic_probing"
UNUSUAL_HOUR = "unusual_hour"
FIRST_TOPIC = "first_topic_access"
THROTTLE_STORM = "throttle_storm"
SLOW_GUESSING = "slow_guessing"
DISTRIBUTED_SPRAYING = "distributed_spraying"
SUSTAINED_VOLUME = "sustained_volume"
NEW_PRINCIPAL_PROBING = "new_principal_probing"
DESTRUCTIVE_ADMIN = "destructive_admin"

DETECTORS: dict[str, str] = {
    AUTH_BURST_PRINCIPAL: "Burst of failed authentication against one principal",
    AUTH_BURST_ADDRESS: "Burst of failed authentication from one client address",
    SPRAYING: "One address failing against many principals (password spraying)",
    NEW_ADDRESS: "A principal used from a new or rarely seen network",
    VOLUME_SPIKE: "Request or byte volume far above the principal's own baseline",
    DENIED_SPIKE: "Spike of denied requests",
    PROBING: "Many distinct topics denied in a short time (probing)",
    UNUSUAL_HOUR: "Access at an hour the principal is normally idle",
    FIRST_TOPIC: "A principal's first access to a topic",
    THROTTLE_STORM: "Storm of throttled requests (quota exhausted)",
    SLOW_GUESSING: "Failed logins against one principal spread over many hours (low and slow)",
    DISTRIBUTED_SPRAYING: "Failed logins from many unfamiliar addresses and networks (distributed)",
    SUSTAINED_VOLUME: "Several times the principal's usual volume, hour after hour",
    NEW_PRINCIPAL_PROBING: "A principal with no history reaching outside its tenant",
    DESTRUCTIVE_ADMIN: "Deletions by a principal that never administered anything",
}
# Which kind of entity each detector's findings name.
ENTITY: dict[str, str] = {
    AUTH_BURST_PRINCIPAL: "principal",
    AUTH_BURST_ADDRESS: "address",
    SPRAYING: "address",
    NEW_ADDRESS: "principal",
    VOLUME_SPIKE: "principal",
    DENIED_SPIKE: "principal",
    PROBING: "principal",
    UNUSUAL_HOUR: "principal",
    FIRST_TOPIC: "principal",
    THROTTLE_STORM: "principal",
    SLOW_GUESSING: "principal",
    DISTRIBUTED_SPRAYING: "address",
    SUSTAINED_VOLUME: "principal",
    NEW_PRINCIPAL_PROBING: "principal",
    DESTRUCTIVE_ADMIN: "principal",
}
SEVERITIES = ("low", "medium", "high", "critical")
