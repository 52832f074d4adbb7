"""List prices of the fleet's machines: the one table ``raytpu cost`` and the plan read.

USD per hour. TPU prices are per *chip*-hour (slice price / chips; v4/v5p names count two
TensorCores per chip), CPU machine prices per VM-hour. Every number below was read from
:data:`SOURCE` (SkyPilot's GCP catalog, itself scraped from the Google Cloud billing
catalog) on :data:`DATE`, except where an entry names its own source. Spot prices
"are variable and can change up to once every day" (cloud.google.com/spot-vms/pricing):
treat them as a snapshot. Negotiated prices override these per stack
(``raytpu:cost.prices`` / ``raytpu:cost.machines``).

Not priced here: the GKE cluster management fee, boot disks, network egress, storage.
"""

from __future__ import annotations

from dataclasses import dataclass

CURRENCY = "USD"
HOURS_PER_MONTH = 730  # Google Cloud's pricing calculator month
CATALOG_COMMIT = "017e2502fb63c7a28757acd94002b2d6099d3e3d"
SOURCE = (
    "https://github.com/skypilot-org/skypilot-catalog/blob/"
    f"{CATALOG_COMMIT}/catalogs/v7/gcp/vms.csv"
)
DATE = "2026-12-03"
# v6e one-year commitment price: Google's Trillium GA announcement as reported by Neowin
# (Dec 2024): "starting at $2.7000 per chip-hour ... 1-year and 3-year commitments ...
# $1.8900 and $1.2200" (shared/ref/notes/platform.md §4.1).
V6E_CUD_SOURCE = "Google Cloud Trillium GA announcement (Dec 2024), as reported by Neowin"


@dataclass(frozen=True)
class ChipPrice:
    """One TPU generation in one region, per chip-hour."""

    on_demand: float
    spot: float | None
    commitment_1y: float | None = None
    """A one-year committed-use price (what reservations are billed at), where sourced."""
    commitment_source: str | None = None


@dataclass(frozen=True)
class MachinePrice:
    """One CPU machine type in one region, per VM-hour."""

    on_demand: float
    spot: float | None


# Per TPU generation (raytpu.facts.catalog names), per region. Catalog rows used (zone: slice
# price / chips): v4 tpu-v4-6144 us-central2-b 9891.84 / 3072; v5e tpu-v5litepod-16
# 19.2 / 16 in us-central1/east1/west1/west4/east5; v5p tpu-v5p-8 16.8 / 4.
TPU_PRICES: dict[str, dict[str, ChipPrice]] = {
    "v4": {
        "us-central2": ChipPrice(3.22, 0.9215),
    },
    "v5e": {
        "us-central1": ChipPrice(1.20, 0.21298),
        "us-east1": ChipPrice(1.20, 0.21298),
        "us-west1": ChipPrice(1.20, 0.21298),
        "us-west4": ChipPrice(1.20, 0.4692),
        "us-east5": ChipPrice(1.20, 0.60),
        "us-south1": ChipPrice(1.416, 0.5664),
        "europe-west4": ChipPrice(1.56, 0.44261),
        "asia-east1": ChipPrice(1.38948, 0.69474),
    },
    "v5p": {
        "us-central1": ChipPrice(4.20, 1.68),
        "us-east1": ChipPrice(4.20, 1.68),
        "us-east5": ChipPrice(4.20, 1.56009),
        "us-south1": ChipPrice(4.779, 2.3954),
        "europe-west4": ChipPrice(4.2525, 1.34849),
    },
    # v6e: the same catalog commit as transcribed in shared/ref/notes/platform.md §4.1
    # (rows not re-read for this table).
    "v6e": {
        "us-central1": ChipPrice(2.70, 0.64833, 1.89, V6E_CUD_SOURCE),
        "us-east1": ChipPrice(2.70, 0.64833, 1.89, V6E_CUD_SOURCE),
        "us-west1": ChipPrice(2.70, 0.64833, 1.89, V6E_CUD_SOURCE),
        "us-east5": ChipPrice(2.70, 1.08, 1.89, V6E_CUD_SOURCE),
        "us-east4": ChipPrice(2.70, 0.85833, 1.89, V6E_CUD_SOURCE),
        "us-south1": ChipPrice(2.70, 1.89, 1.89, V6E_CUD_SOURCE),
    },
}

# CPU machine types of the system pool (the stacks use n2-standard-4/-8). Catalog rows of
# n2-standard-4; n2 is priced per vCPU and GB, so n2-standard-8 is exactly twice that (the
# catalog's n2-standard-32 us-central1, 1.55389, is 8 x 0.19424 to the cent).
_N2_STANDARD_4: dict[str, MachinePrice] = {
    "us-central1": MachinePrice(0.19424, 0.05552),
    "us-east1": MachinePrice(0.19424, 0.05552),
    "us-west1": MachinePrice(0.19424, 0.05552),
    "us-east5": MachinePrice(0.19424, 0.05589),
    "us-east4": MachinePrice(0.21876, 0.05147),
    "us-west4": MachinePrice(0.21875, 0.08747),
    "us-south1": MachinePrice(0.2292, 0.05698),
    "europe-west4": MachinePrice(0.21383, 0.07087),
    "asia-east1": MachinePrice(0.2249, 0.06447),
}


def _scaled(prices: dict[str, MachinePrice], factor: int) -> dict[str, MachinePrice]:
    return {
        region: MachinePrice(round(p.on_demand * factor, 5),
                             round(p.spot * factor, 5) if p.spot is not None else None)
        for region, p in prices.items()
    }


MACHINE_PRICES: dict[str, dict[str, MachinePrice]] = {
    "n2-standard-4": _N2_STANDARD_4,
    "n2-standard-8": _scaled(_N2_STANDARD_4, 2),
    "n2-standard-16": _scaled(_N2_STANDARD_4, 4),
}


def chip_price(generation: str, region: str) -> ChipPrice | None:
    return TPU_PRICES.get(generation, {}).get(region)


def machine_price(machine_type: str, region: str) -> MachinePrice | None:
    return MACHINE_PRICES.get(machine_type, {}).get(region)


# Memorystore for Redis: no sourced price here. The rates once written from memory were never
# checked against the pricing page, so `raytpu cost` shows the instance as unpriced, out of
# the totals, until the stack prices it (raytpu:cost.memorystore.<tier>, USD per GB-hour),
# as a negotiated price would come in.
MEMORYSTORE_PRICING = "https://cloud.google.com/memorystore/docs/redis/pricing"
