"""The Memorystore instance's server CAs: during a rotation the instance lists the new CA
beside the old one, and the Ray pods must trust both (Memorystore in-transit encryption:
server certificates rotate, a new CA is issued long before the old one expires)."""

from __future__ import annotations

from typing import Any

import pytest
import raytpu.plan.mocks as mocks
from infra_support import PROJECT, run_alone
from raytpu.components import MemorystoreRedis, MemorystoreRedisArgs

OLD = "-----BEGIN CERTIFICATE-----\nMIIBold\n-----END CERTIFICATE-----"
NEW = "-----BEGIN CERTIFICATE-----\nMIIBnew\n-----END CERTIFICATE-----\n"


def test_every_server_ca_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    real = mocks._fake_outputs

    def rotating(typ: str, name: str, inputs: dict[str, Any], project: str) -> dict[str, Any]:
        out = real(typ, name, inputs, project)
        if typ == "gcp:redis/instance:Instance":
            out["serverCaCerts"] = [{"cert": OLD, "serialNumber": "1"},
                                    {"cert": NEW, "serialNumber": "2"}]
        return out

    monkeypatch.setattr(mocks, "_fake_outputs", rotating)
    seen: dict[str, str] = {}

    def program() -> None:
        redis = MemorystoreRedis("gcs", MemorystoreRedisArgs(
            project=PROJECT, region="us-west4", network="projects/acme-ml/global/networks/v"))
        redis.ca_cert.apply(lambda pem: seen.update(pem=pem))

    run_alone(program)
    assert seen["pem"] == OLD + "\n" + NEW
    assert seen["pem"].count("BEGIN CERTIFICATE") == 2
