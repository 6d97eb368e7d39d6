"""Kafka wire protocol, sans-IO: framing, the API table, header and body codecs."""
