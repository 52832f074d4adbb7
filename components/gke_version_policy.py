"""GKE version policy: the version a new cluster gets must meet every minimum the stack
needs (TPU generations, the Ray Operator add-on)."""

from __future__ import annotations

from collections.abc import Mapping

from raytpu.facts.versions import version_tuple


class GkeVersionError(ValueError):
    """The cluster's GKE version is older than a TPU generation or add-on needs."""


def check_gke_version(
    *,
    channel_defaults: Mapping[str, str],
    channel: str,
    pinned: str | None,
    required: Mapping[str, str],
    location: str,
) -> str:
    """The version the cluster is created at; raises :class:`GkeVersionError` if too old."""
    if pinned:
        version, source = pinned, "minMasterVersion"
    else:
        found = channel_defaults.get(channel)
        if not found:
            raise GkeVersionError(
                f"GKE release channel {channel} has no default version in {location} "
                f"(channels offered: {', '.join(sorted(channel_defaults)) or 'none'})"
            )
        version, source = found, f"the {channel} channel's default in {location}"
    too_old = [
        f"{why} needs >= {need}"
        for why, need in sorted(required.items())
        if version_tuple(version) < version_tuple(need)
    ]
    if too_old:
        raise GkeVersionError(
            f"GKE {version} ({source}) is too old: {'; '.join(too_old)}. "
            "Choose a newer release channel or set raytpu:cluster.minMasterVersion."
        )
    return version
