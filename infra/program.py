"""The stack program: validated config in, components out.

``pulumi up`` runs it through ``infra/__main__.py``; ``raytpu plan`` runs the same function
under mocks. Config is read and validated here, once; components only see typed Args.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi

from .config import NAMESPACE, ConfigError, StackConfig, parse_stack_config


def read_stack_config() -> StackConfig:
    """The running stack's config, as Pulumi hands it to the program, validated."""
    from pulumi.runtime.config import CONFIG, get_config_env

    raw: dict[str, Any] = {}
    for key, value in {**get_config_env(), **CONFIG.get()}.items():
        if not (key.startswith(f"{NAMESPACE}:") or key == "gcp:project"):
            continue
        if isinstance(value, str) and value[:1] in "[{":
            value = json.loads(value)
        raw[key] = value
    try:
        return parse_stack_config(pulumi.get_stack(), raw)
    except ConfigError as e:
        # RunError prints the message without a Python traceback.
        raise pulumi.RunError("invalid stack configuration:\n" + str(e)) from None


def build(cfg: StackConfig) -> dict[str, Any]:
    """Declare every resource of the stack; return the stack outputs."""
    raise NotImplementedError  # being written: network, cluster, slice pools, storage, Ray


def main() -> None:
    cfg = read_stack_config()
    for warning in cfg.warnings:
        pulumi.log.warn(warning)
    for key, value in build(cfg).items():
        pulumi.export(key, value)
