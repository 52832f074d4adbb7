"""The Kubernetes Pod Security Standards' "baseline" and "restricted" checks, as data over a
pod spec (https://kubernetes.io/docs/concepts/security/pod-security-standards, the controls
the Pod Security admission controller enforces per namespace label).

:func:`restricted_problems` returns one sentence per violated control; empty means the pod
is admitted in a namespace labelled ``pod-security.kubernetes.io/enforce: restricted``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# Baseline: capabilities that may be added (the container runtime's defaults).
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
# Restricted: the only volume types allowed.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(kind) or []:
            yield f"{kind}[{c.get('name')}]", c


def baseline_problems(spec: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    psc = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(f"host namespaces: {field} must be unset or false")
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        out.append("HostProcess: securityContext.windowsOptions.hostProcess")
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            out.append(f"hostPath volumes: volume {v.get('name')!r}")
    for sysctl in psc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            out.append(f"sysctls: {sysctl.get('name')!r} is not in the safe set")
    contexts = [("pod", psc)] + [(w, c.get("securityContext") or {}) for w, c in _containers(spec)]
    for where, sc in contexts:
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append(f"seccomp: {where} is Unconfined")
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault",
                                                                 "Localhost"):
            out.append(f"AppArmor: {where} profile type")
        se = sc.get("seLinuxOptions") or {}
        if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
            out.append(f"SELinux: {where} seLinuxOptions")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"privileged containers: {where}")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            out.append(f"HostProcess: {where}")
        added = set((sc.get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPABILITIES:
            out.append(f"capabilities: {where} adds {sorted(added - BASELINE_CAPABILITIES)}")
        if sc.get("procMount") not in (None, "Default"):
            out.append(f"/proc mount type: {where}")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                out.append(f"host ports: {where} hostPort {port['hostPort']}")
    return out


def restricted_problems(spec: Mapping[str, Any]) -> list[str]:
    """Every baseline and restricted control ``spec`` (a PodSpec) violates."""
    out = baseline_problems(spec)
    psc = spec.get("securityContext") or {}
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume types: {v.get('name')!r} is {sorted(kinds)}")
    pod_non_root = psc.get("runAsNonRoot") is True
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type") in ("RuntimeDefault", "Localhost")
    if psc.get("runAsUser") == 0:
        out.append("running as non-root user: pod runAsUser is 0")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"privilege escalation: {where} must set allowPrivilegeEscalation: false")
        non_root = sc.get("runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            out.append(f"running as non-root: {where} (runAsNonRoot true on the pod or here)")
        if sc.get("runAsUser") == 0:
            out.append(f"running as non-root user: {where} runAsUser is 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if (seccomp is None and not pod_seccomp) or seccomp not in (None, "RuntimeDefault",
                                                                  "Localhost"):
            out.append(f"seccomp: {where} needs RuntimeDefault or Localhost")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"capabilities: {where} must drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"capabilities: {where} may add only NET_BIND_SERVICE")
    return out
