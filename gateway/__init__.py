"""KaaS Gateway: a protocol-aware security gateway in front of a Kafka cluster."""

__version__ = "0.1.0"
