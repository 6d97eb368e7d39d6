"""A software bill of materials (SPDX 2.3 JSON) of a container image: its Debian
packages (from the image's dpkg status file) and its Python distributions (listed by
the image's own interpreter). Pure: the inputs are text and lists, the output a dict."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# Run with the image's Python: every installed distribution, one JSON list.
PYTHON_INVENTORY = (
    "import importlib.metadata as m, json, sys\n"
    "json.dump(sorted({(d.metadata['Name'], d.version) for d in m.distributions()}),"
    " sys.stdout)\n"
)


@dataclass(frozen=True, order=True)
class Component:
    """One package in the image: ``kind`` is ``deb`` or ``pypi``."""

    kind: str
    name: str
    version: str
    licence: str = "NOASSERTION"

    @property
    def purl(self) -> str:
        if self.kind == "deb":
            return f"pkg:deb/debian/{self.name}@{self.version}?distro=debian-12"
        normalized = self.name.lower().replace("_", "-").replace(".", "-")
        return f"pkg:pypi/{normalized}@{self.version}"


def installed_debs(status_text: str) -> list[Component]:
    """The packages a dpkg status file says are installed (``install ok installed``)."""
    found = []
    for stanza in status_text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Status") == "install ok installed" and "Package" in fields:
            arch = fields.get("Architecture", "")
            name = fields["Package"] if arch in ("", "all") else f"{fields['Package']}:{arch}"
            found.append(Component("deb", name, fields.get("Version", "")))
    return sorted(found)


def python_components(pairs: Iterable[tuple[str, str]]) -> list[Component]:
    """Components from the ``(name, version)`` pairs of ``PYTHON_INVENTORY``."""
    return sorted(Component("pypi", name, version) for name, version in pairs)


def _spdx_id(component: Component) -> str:
    safe = "".join(c if c.isalnum() or c in ".-" else "-" for c in component.name)
    return f"SPDXRef-{component.kind}-{safe}"


def spdx_document(
    image: str, components: Iterable[Component], created: datetime | None = None
) -> dict[str, Any]:
    """An SPDX 2.3 document: the image as the described package, which contains every
    component."""
    when = (created or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    root = "SPDXRef-image"
    packages: list[dict[str, Any]] = [
        {
            "SPDXID": root, "name": image, "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False, "primaryPackagePurpose": "CONTAINER",
        }
    ]  # fmt: skip
    relationships = [
        {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
         "relatedSpdxElement": root}
    ]  # fmt: skip
    for component in sorted(set(components)):
        packages.append(
            {
                "SPDXID": _spdx_id(component),
                "name": component.name,
                "versionInfo": component.version,
                "downloadLocation": "NOASSERTION",
                "filesAnalyzed": False,
                "licenseConcluded": "NOASSERTION",
                "licenseDeclared": component.licence,
                "externalRefs": [
                    {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                     "referenceLocator": component.purl}
                ],
            }
        )  # fmt: skip
        relationships.append(
            {"spdxElementId": root, "relationshipType": "CONTAINS",
             "relatedSpdxElement": _spdx_id(component)}
        )  # fmt: skip
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"{image} image contents",
        "documentNamespace": f"https://kaas-gateway.invalid/spdx/{image}/{uuid.uuid4()}",
        "creationInfo": {"created": when, "creators": ["Tool: kgw-image-build"]},
        "packages": packages,
        "relationships": relationships,
    }


def listed(document: Mapping[str, Any], kind: str) -> dict[str, str]:
    """``{name: version}`` of one kind (``deb``/``pypi``) of component in a document."""
    found = {}
    for package in document.get("packages", []):
        for ref in package.get("externalRefs", []):
            if ref.get("referenceType") == "purl" and ref["referenceLocator"].startswith(
                f"pkg:{kind}/"
            ):
                found[package["name"]] = package["versionInfo"]
    return found
