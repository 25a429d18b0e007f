"""eksctl's published schema.json where it is stricter than eksctl itself.

The schema is generated from eksctl's Go types and their comments; in two places at v0.230.0 it refuses a
ClusterConfig that eksctl accepts, and validate goes by what eksctl does (a schema finding is an error only
when eksctl would fail). Each correction names the eksctl source that decides it.
"""

from __future__ import annotations

import copy


def _discriminator_in_variants(definitions: dict, name: str, field: str) -> None:
    """identityProviders[]: eksctl reads `type` first to pick the variant, then decodes the whole entry into it
    (v0.230.0 pkg/apis/eksctl.io/v1alpha5/identity_provider.go, IdentityProvider.UnmarshalJSON), so `type: oidc`
    sits beside the variant's fields; the schema's variants close their properties without it."""
    outer = definitions.get(name) or {}
    for variant in outer.get("oneOf") or []:
        target = definitions.get(str(variant.get("$ref", "")).rpartition("/")[2])
        if target is not None and field in (outer.get("properties") or {}):
            target.setdefault("properties", {})[field] = outer["properties"][field]


def _optional(definitions: dict, name: str, field: str) -> None:
    """remoteNetworkConfig.vpcGatewayID: a `+required` comment makes the schema require it, but eksctl checks it
    only when it is set (v0.230.0 pkg/apis/eksctl.io/v1alpha5/validation.go, validateRemoteNetworkingConfig) and
    adds gateway routes only for a tgw- or vgw- id (pkg/cfn/builder/vpc_ipv4.go)."""
    definition = definitions.get(name) or {}
    if field in (definition.get("required") or []):
        definition["required"] = [r for r in definition["required"] if r != field]


def as_eksctl_validates(schema: dict) -> dict:
    """A copy of eksctl's schema.json corrected where eksctl accepts what the file refuses."""
    fixed = copy.deepcopy(schema)
    definitions = fixed.get("definitions") or {}
    _discriminator_in_variants(definitions, "IdentityProvider", "type")
    _optional(definitions, "RemoteNetworkConfig", "vpcGatewayID")
    return fixed
