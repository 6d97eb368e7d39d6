"""Multi-process workers (decision 0030): N ``kgw serve`` processes on the same ports.

| module | concern | I/O |
| --- | --- | --- |
| ``settings`` | the ``server`` configuration section | none |
| ``plan`` | how many workers; each worker's view of the configuration | none |
| ``pool`` | ``WorkerPool``: restarts, backoff, signals, draining (events → commands) | none |
| ``aggregate`` | one ``/metrics`` for the group: the workers' expositions summed | none |
| ``probe`` | a GET to a worker's private loopback endpoint | asyncio |
| ``worker`` | the worker side: status file, log tag, dying with the supervisor | files |
| ``supervisor`` | runs the pool's commands; the group's endpoint | processes |

Nothing is imported here: ``gateway.config`` imports ``settings``.
"""
