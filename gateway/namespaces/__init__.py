"""Transparent namespaces: each tenant its own virtual cluster (docs/namespaces.md).

``names`` (one tenant's prefix, both ways), ``paths`` (renaming fields of a kio
message), ``table`` (which fields of which API are names), ``mappers`` (per-API
request and response mapping), ``directory`` (who is namespaced), ``filter`` (the
filter, first in the chain), ``settings`` (the ``namespaces:`` section), ``wiring``.
"""

from .filter import NamespaceFilter
from .names import NameRefused, Namespace

__all__ = ["NameRefused", "Namespace", "NamespaceFilter"]
