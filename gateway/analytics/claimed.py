"""Whom a failed login was against: the identity the client claimed, when the record has it.

The gateway's failed ``auth`` records keep ``principal`` as what it decided
(``User:ANONYMOUS``) and name the claim in ``claimed`` (docs/access-log.md): PLAIN
claims an API key id, which is kept as is (``ak_…``); SCRAM and GSSAPI claim a user
name, read as ``User:<name>`` so it meets the principal of that user's successful
traffic. Records without ``claimed`` (older gateways, the simulator) fall back to
``principal``.
"""

from __future__ import annotations

from typing import Any


def claimed_login() -> Any:
    """The claimed identity as the detectors name it; null when the record claims none."""
    from pyspark.sql import functions as F

    claimed = F.col("claimed")
    named = F.when(F.col("sasl_mechanism") == "PLAIN", claimed).otherwise(
        F.concat(F.lit("User:"), claimed)
    )
    return F.when(claimed.isNotNull() & (claimed != ""), named)


def failed_login_subject() -> Any:
    """The column to count a failed login against: the claim, else ``principal``."""
    from pyspark.sql import functions as F

    return F.coalesce(claimed_login(), F.col("principal"))
