"""Dev-stack tooling: the pinned Apache Kafka jars and a local KRaft cluster."""
