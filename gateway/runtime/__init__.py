"""The asyncio network layer: listeners, client and upstream connections.

This is the only package that does I/O on the data path; the protocol logic
lives in ``session.Session``. One module per job: ``gateway`` (the composition
root, start and drain), ``listeners``, ``client`` (a tenant's connection),
``steps`` (its SASL steps and local work), ``upstream`` (the broker connection,
the pre-authentication stand-in and the upstream login), ``loops`` (metadata
refresh, idle sweep, SASL revalidation).
"""
