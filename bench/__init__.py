"""Throughput and latency benchmark: Kafka's own perf tools, direct vs through the gateway.

``python -m bench.run`` (see ``bench/README.md``). Lives apart from ``tests/``:
it measures, it does not assert.
"""
