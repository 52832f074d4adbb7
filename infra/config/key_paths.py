"""Stack key paths for component Args errors: ``NetworkArgs.pods_cidr`` is
``raytpu:network.podsCidr`` to whoever wrote the stack file.

Components validate their typed Args and name Args fields (they are used from other Pulumi
programs too); ``program._stack_args`` turns those messages into stack key paths here.
"""

from __future__ import annotations

import re

from pydantic.alias_generators import to_camel

# Args class -> field -> stack key. "{key}" is the key of the config section the Args came
# from (``raytpu:network``, ``raytpu:slices[0]``, ...); fields not listed map to
# "{key}.<camelCase field>".
_FIELDS: dict[str, dict[str, str]] = {
    "NetworkArgs": {
        "project": "gcp:project",
        "region": "raytpu:zone",
        "node_tag": "raytpu:cluster.name",
        "tpu_node_tag": "raytpu:cluster.name",
        "master_ipv4_cidr_block": "raytpu:cluster.masterIpv4CidrBlock",
    },
    "ExistingNetwork": {"*": "raytpu:network.existing.{camel}"},
    "GkeClusterArgs": {
        "project": "gcp:project",
        "location": "raytpu:zone",
        "cluster_name": "raytpu:cluster.name",
        "node_service_account_id": "raytpu:cluster.name",
        "node_tags": "raytpu:cluster.name",
        "master_authorized_networks": "raytpu:cluster.masterAuthorizedNetworks{index}.cidrBlock",
    },
    "SystemPoolArgs": {"*": "raytpu:cluster.systemPool.{camel}", "": "raytpu:cluster.systemPool"},
    "TpuSlicePoolArgs": {
        "project": "gcp:project",
        "zone": "raytpu:zone",
        "location": "raytpu:zone",
        "pool_name": "{key}.name",
        "shape": "{key}.tpu",
        "node_tags": "raytpu:cluster.name",
    },
    "CheckpointStorageArgs": {
        "project": "gcp:project",
        "bucket_name": "raytpu:storage.bucket",
        "namespace": "raytpu:ray.namespace",
        "ksa_name": "raytpu:ray.serviceAccount",
        "gsa_account_id": "raytpu:cluster.name",
    },
    "ImageRegistryArgs": {
        "project": "gcp:project",
        "location": "raytpu:zone",
        "repository_id": "raytpu:registry.repository",
    },
}

_REF = re.compile(
    r"\b(?P<cls>" + "|".join(_FIELDS) + r")(?:\.(?P<field>[a-z_][a-z0-9_]*))?"
    r"(?P<index>(?:\[\d+\])?)(?=[\s:.,;]|$)"
)


def _key_of(cls: str, field: str | None, index: str, key: str) -> str:
    table = _FIELDS[cls]
    if field is None:
        template = table.get("", "{key}")
    else:
        template = table.get(field) or table.get("*") or "{key}.{camel}{index}"
    return template.format(key=key, camel=to_camel(field or ""), index=index)


def stack_key_message(key: str, message: str) -> str:
    """``message`` of a component's Args error with every Args field replaced by its stack
    key; prefixed with ``key`` unless it already starts with a key path."""
    out = _REF.sub(lambda m: _key_of(m["cls"], m["field"], m["index"], key), message)
    if re.match(r"^(raytpu|gcp):", out):
        return out
    return f"{key}: {out}"
