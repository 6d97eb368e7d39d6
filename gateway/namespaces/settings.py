"""The ``namespaces:`` section: which tenants see transparent names, on which listeners."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class NamespacesConfig(BaseModel):
    """Transparent namespaces (docs/namespaces.md): a tenant's plain names on its side,
    its prefix on the brokers. Tenants are opted in here (``transparent_tenants``) or
    in the tenant store (``kgw tenant create --namespace transparent``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # tenants with transparent names; "*": every tenant (the tenant store adds its own)
    transparent_tenants: list[str] = Field(default_factory=list)
    # listeners where they apply; empty: every listener. Leave the operators' (super-user)
    # listener out: there every client sees cluster-side names.
    listeners: list[str] = Field(default_factory=list)
    # the cluster-side prefix of a tenant's names; must be the quotas' topic_prefix and
    # the prefix the policies grant (``{tenant}.`` by default)
    prefix_format: str = "{tenant}."

    @field_validator("prefix_format")
    @classmethod
    def _has_tenant(cls, value: str) -> str:
        if "{tenant}" not in value or value == "{tenant}":
            raise ValueError(
                "prefix_format must contain {tenant} and a separator, e.g. '{tenant}.'"
            )
        return value

    @field_validator("transparent_tenants")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name or (name != "*" and not name.replace("-", "").isalnum()):
                raise ValueError(f"transparent_tenants: {name!r} is not a tenant name or '*'")
        return value
