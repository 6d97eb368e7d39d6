"""Broker addresses: where the brokers are privately and where clients see them.

``topology`` keeps node id → private address (shared by every listener) and a
listener's ``PublicMap``; ``sni`` is the map for SNI mode (one TLS port, brokers
told apart by host name); ``rewrite`` replaces the private addresses in every
address-bearing response with the listener's public ones, returning the same
object when nothing changed. None of them does any I/O.
"""
