"""The image's bill of materials (gateway/devstack/sbom.py): dpkg status parsing and the
SPDX document, from fixed inputs."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from gateway.devstack import sbom

STATUS = """Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u14
Description: GNU C Library
 continuation line: Version: 9.9

Package: apt
Status: deinstall ok config-files
Architecture: amd64
Version: 2.6.1

Package: tzdata
Status: install ok installed
Architecture: all
Version: 2025b-0+deb12u1
"""


def test_only_installed_packages_are_listed_with_their_architecture() -> None:
    debs = sbom.installed_debs(STATUS)
    assert [(c.name, c.version) for c in debs] == [
        ("libc6:amd64", "2.36-9+deb12u14"), ("tzdata", "2025b-0+deb12u1"),
    ]  # fmt: skip
    assert debs[0].purl == "pkg:deb/debian/libc6:amd64@2.36-9+deb12u14?distro=debian-12"


def test_the_document_lists_every_component_once_and_reads_back() -> None:
    components = [
        *sbom.python_components([("PyYAML", "6.0.2"), ("kaas-gateway", "0.1.0")]),
        *sbom.installed_debs(STATUS),
        *sbom.python_components([("PyYAML", "6.0.2")]),  # a duplicate is listed once
    ]
    when = datetime(2026, 11, 26, tzinfo=UTC)
    document = json.loads(json.dumps(sbom.spdx_document("kaas-gateway:0.1.0", components, when)))
    assert document["spdxVersion"] == "SPDX-2.3"
    assert document["creationInfo"]["created"] == "2026-11-26T00:00:00Z"
    assert sbom.listed(document, "pypi") == {"PyYAML": "6.0.2", "kaas-gateway": "0.1.0"}
    assert sbom.listed(document, "deb") == {
        "libc6:amd64": "2.36-9+deb12u14", "tzdata": "2025b-0+deb12u1",
    }  # fmt: skip
    ids = [p["SPDXID"] for p in document["packages"]]
    assert len(ids) == len(set(ids)) == 5
    contained = {r["relatedSpdxElement"] for r in document["relationships"]
                 if r["relationshipType"] == "CONTAINS"}  # fmt: skip
    assert contained == set(ids) - {"SPDXRef-image"}
    purls = [r["referenceLocator"] for p in document["packages"] for r in p.get("externalRefs", [])]
    assert "pkg:pypi/pyyaml@6.0.2" in purls
