"""kio knows every request version of the Kafka the project runs (its clients jar's
``common/message/*Request.json``), so the refusal conformance test
(tests/unit/enforcement/test_refusal_conformance.py), which walks kio's versions,
walks Kafka's. Needs the Kafka jars (fetched like the cluster fixture's); fails
without them. No cluster is started.
"""

from __future__ import annotations

import json
import re
import zipfile

from gateway.devstack import kafka_dist
from gateway.protocol import apis

_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)


def kafka_request_versions() -> dict[int, set[int]]:
    """API key → the versions Kafka's own schemas declare (``validVersions``)."""
    libs = kafka_dist.ensure_kafka()
    (jar,) = libs.glob(f"kafka-clients-{kafka_dist.KAFKA_VERSION}.jar")
    found: dict[int, set[int]] = {}
    with zipfile.ZipFile(jar) as archive:
        for name in archive.namelist():
            if not (name.startswith("common/message/") and name.endswith("Request.json")):
                continue
            schema = json.loads(_COMMENT.sub("", archive.read(name).decode()))
            valid = schema["validVersions"]
            if valid == "none":  # removed APIs kept for their numbers
                continue
            low, _, high = valid.partition("-")
            found[int(schema["apiKey"])] = set(range(int(low), int(high or low) + 1))
    return found


def test_kio_knows_every_request_version_of_the_kafka_in_use() -> None:
    versions = kafka_request_versions()
    assert len(versions) > 70  # the jar was read
    missing = {
        apis.api_name(key): sorted(wanted - apis.decodable_versions(key))
        for key, wanted in versions.items()
        if not wanted <= apis.decodable_versions(key)
    }
    assert missing == {}
