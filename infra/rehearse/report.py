"""``raytpu rehearse``'s output: the JSON object (docs/rehearsal.md) and the
text a person reads, both from one :class:`~raytpu.rehearse.run.Rehearsal`."""

from __future__ import annotations

import dataclasses
from typing import Any

from raytpu.rehearse.access import to_json
from raytpu.rehearse.run import Rehearsal


def to_dict(r: Rehearsal) -> dict[str, Any]:
    return {
        "stack": r.stack,
        "ok": r.ok,
        "versions": r.versions,
        "caveats": r.caveats,
        "seconds": round(r.seconds, 2),
        "timings": {k: round(v, 2) for k, v in r.timings.items()},
        "settled": r.settled,
        "crds": r.crds,
        "nodes": [dataclasses.asdict(p) for p in r.pools],
        "objects": [dataclasses.asdict(o) for o in r.objects],
        "pods": [dataclasses.asdict(p) for p in r.pods],
        "missing_pods": r.missing_pods,
        "slices": [dataclasses.asdict(s) for s in r.slices],
        "queues": [q.to_dict() for q in r.queues],
        "access": to_json(r.access),
        "placeholders": [p.to_dict() for p in r.placeholders],
        "kubeconfig": r.kubeconfig,
        "member_kubeconfigs": r.member_kubeconfigs,
    }


def _where(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def summary(r: Rehearsal) -> str:
    admitted = sum(o.admitted for o in r.objects)
    bound = sum(p.node is not None for p in r.pods)
    slices = sum(s.bound for s in r.slices)
    queues = (f", {sum(q.active for q in r.queues)}/{len(r.queues)} team queues active"
              if r.queues else "")
    if r.access:
        queues += (f", {sum(a.as_expected for a in r.access)}/{len(r.access)} access checks "
                   "as designed")
    return (f"{'ok' if r.ok else 'FAILED'}: {r.stack}: {admitted}/{len(r.objects)} objects "
            f"admitted, {bound}/{len(r.pods)} Ray pods bound, {slices}/{len(r.slices)} "
            f"multi-host slices on one pool{queues}, in {r.seconds:.1f} s")


def render(r: Rehearsal) -> str:
    lines = [f"rehearsal of {r.stack}: " + ", ".join(f"{k} {v}" for k, v in r.versions.items()),
             "", f"nodes ({sum(p.nodes for p in r.pools)}):"]
    lines += [f"  {p.name}: {p.nodes} x {p.machine_type}"
              + (f", {p.tpu_chips} chips, topology {p.topology}" if p.tpu_chips else "")
              for p in r.pools]
    lines += ["", f"objects ({len(r.objects)}):"]
    lines += [f"  {'admitted' if o.admitted else 'REFUSED '}  {o.kind} "
              f"{_where(o.namespace, o.name)}" + (f": {o.message}" if o.message else "")
              for o in r.objects]
    lines += ["", f"Ray pods ({len(r.pods)}):"]
    lines += [f"  {_where(p.namespace, p.name)} [{p.group}]: "
              + (f"{p.phase} on {p.node} (pool {p.pool})" if p.node
                 else f"PENDING: {p.reason}") for p in r.pods]
    lines += [f"  MISSING: {m}" for m in r.missing_pods]
    if r.slices:
        lines += ["", "multi-host slices:"]
        lines += [f"  {s.cluster}/{s.group}" + (f" {s.replica}" if s.replica else "")
                  + f": {s.hosts}/{s.expected_hosts} hosts "
                  + (f"on pool {s.pool}" if s.bound else
                     "NOT on one pool" if s.pool is None else f"on pool {s.pool}, incomplete")
                  for s in r.slices]
    if r.queues:
        lines += ["", "team queues (Kueue):"]
        lines += [f"  {q.team} -> ClusterQueue {q.cluster_queue}: "
                  + (f"{q.admitted} admitted, {q.pending} pending, {q.chips_in_use} TPU chips "
                     "in use" if q.active else f"INACTIVE: {q.reason}") for q in r.queues]
    if r.access:
        lines += ["", "team access (RBAC, as each member):"]
        lines += [f"  {'ok  ' if a.as_expected else 'WRONG'} {a.member} ({a.team}): {a.action}"
                  + (f" in {a.namespace}" if a.namespace else "") + f": {a.result}"
                  + ("" if a.as_expected else f", expected {a.expected}")
                  + (f" ({a.reason})" if a.reason and not a.as_expected else "")
                  for a in r.access]
    if r.placeholders:
        lines += ["", "placeholders (known after `pulumi up`):"]
        lines += [f"  {p.kind} {_where(p.namespace, p.name)} {p.path} = {p.value}"
                  for p in r.placeholders]
    lines += ["", "caveats:"] + [f"  - {c}" for c in r.caveats]
    if not r.settled:
        lines.append(f"  - not settled within the wait ({r.timings.get('settle', 0):.0f} s)")
    if r.kubeconfig:
        lines += ["", f"kept: KUBECONFIG={r.kubeconfig}"]
    lines += ["", summary(r)]
    return "\n".join(lines)
