"""A connection's quota buckets for the requests it forwards (issue 16, decision 0047).

``QuotaEngine.charge_request`` books every forwarded request: one ``REQUESTS`` and,
for a Produce, its ``PRODUCE_BYTES``. Looking the two buckets up for each request
(a key tuple, its hashes, a dict probe per kind) was most of the charge. A
``Booking`` keeps what the lookups found for one connection's subject, good for as
long as the engine's ``generation`` is the one it was filled in: the engine moves
to a new generation whenever it forgets a bucket or a limit (new settings, a bucket
dropped or released, a change of Redis state), so a booking never outlives what it
points to. Pure data; the engine fills and reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from .bucket import LeasedBucket, TokenBucket
    from .model import Limit, Subject


class Unset:
    """Not looked up yet in this generation."""


class Closed:
    """Under a quota, but Redis is down and the policy fails closed: the longest throttle."""


UNSET = Unset()
CLOSED = Closed()
Hot: TypeAlias = "tuple[Limit, TokenBucket | LeasedBucket]"
Found: TypeAlias = "Hot | Closed | None"  # None: no quota applies


class Booking:
    """One connection's memo of what ``REQUESTS`` and ``PRODUCE_BYTES`` charges fall under."""

    __slots__ = ("generation", "produced", "requests", "subject")

    def __init__(self) -> None:
        self.generation = -1
        self.subject: Subject | None = None
        self.requests: Found | Unset = UNSET
        self.produced: Found | Unset = UNSET

    def reset(self, generation: int, subject: Subject) -> None:
        self.generation = generation
        self.subject = subject
        self.requests = self.produced = UNSET
