"""The asyncio network layer: listeners, client and upstream connections.

This is the only package that does I/O on the data path; the protocol logic lives in
``core.Connection`` (events in, commands out) and the ``session.Session`` it drives.
One module per job: ``gateway`` (the composition root, start and drain), ``sessions``
(what each connection's session is made of), ``listeners``, ``client`` (a tenant's
connection: the interpreter of the core's commands), ``reports`` (log lines of logins
and lockouts), ``upstream`` (the broker connection, the pre-authentication stand-in
and the upstream login), ``supervisor`` (every task; the background loops started
together), ``loops`` (metadata refresh, idle sweep, SASL revalidation).
"""
