"""Examples that ship with the gateway: ``gateway.yaml`` (every configuration key) and
operators' filters written against ``gateway.filters.api`` (docs/filters.md)."""
