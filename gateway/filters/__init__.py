"""Filters: per-API transformations of requests and responses, operators' own included.

``api`` is the public interface an operator's filter is written against (the only
module a filter needs to import); ``chain`` runs the configured filters for one
connection; ``loader`` builds them from the ``filters:`` section of the configuration
(a module path or a ``kgw.filters`` entry point). docs/filters.md is the guide.
"""

from .api import BaseFilter, Filter, FilterContext, FilterError, RequestCall, ResponseCall

__all__ = ["BaseFilter", "Filter", "FilterContext", "FilterError", "RequestCall", "ResponseCall"]
