"""TLS for the gateway: terminating TLS and mutual TLS on client listeners, TLS to
the brokers, rotation without restarts, principal mapping from certificates,
SNI routing, and the certificate authority behind ``kgw certs``.

| module | concern | I/O |
| --- | --- | --- |
| ``settings`` | the ``tls``/``sni`` configuration sections | none |
| ``principal`` | Kafka-style mapping rules, certificate → ``User:<name>`` | none |
| ``layer`` | server-side TLS as a sans-IO layer, refusal reasons | none |
| ``revocation`` | which certificates a set of CRLs revokes | none |
| ``ciphersuites`` | TLS 1.3 suites on a context (OpenSSL via ``ctypes``) | none |
| ``material`` | files → validated ``ssl.SSLContext`` | reads files |
| ``reloader`` | current context, SIGHUP and file-change reloads | reads files |
| ``accept`` | handshake on accepted connections, identity, SNI route | asyncio |
| ``upstream`` | the context for broker connections | reads files |
| ``ca`` | the certificate authority (``kgw certs``) | writes files |

The broker names advertised in SNI mode are in ``gateway/addresses/sni.py``.
"""
