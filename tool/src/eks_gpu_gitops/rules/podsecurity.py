"""Pod Security admission: pods in a namespace that enforces the baseline or restricted level.

The controls are those of the Pod Security Standards (kubernetes.io/docs/concepts/security/
pod-security-standards/) that training and device-plugin pods run into; AppArmor, SELinux, /proc mount
type, sysctls and Windows HostProcess are not checked.
"""

from __future__ import annotations

from ..model import PodTemplate, Scope, mapping, sequence
from .registry import Finding, category

rule = category("Hygiene and security")

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
LEVELS = ("baseline", "restricted")

# Capabilities baseline lets a container add; restricted lets it add only NET_BIND_SERVICE.
_BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
_RESTRICTED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
)


def enforced_levels(scope: Scope) -> dict[str, str]:
    """Namespace name: the level its enforce label sets, for namespaces that enforce baseline or restricted."""
    found = {}
    for namespace in scope.of("Namespace", ""):
        level = str(namespace.labels.get(ENFORCE_LABEL, ""))
        if level in LEVELS:
            found[namespace.name] = level
    return found


def _capability(name) -> str:
    return str(name).upper().removeprefix("CAP_")


def _baseline(template: PodTemplate):
    """(field path, problem) of each baseline control the pods break."""
    spec, path = template.spec, template.path
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field) is True:
            yield (*path, field), f"{field} is true"
    for name, (index, volume) in template.volumes.items():
        if "hostPath" in volume:
            yield (*path, "volumes", index, "hostPath"), f"volume {name} is a hostPath"
    if mapping(spec, "securityContext", "seccompProfile").get("type") == "Unconfined":
        yield (*path, "securityContext", "seccompProfile", "type"), "the pod's seccomp profile is Unconfined"
    for container in template.containers + template.init_containers:
        context = mapping(container.spec, "securityContext")
        where = (*container.path, "securityContext")
        label = template.container_label(container)
        if context.get("privileged") is True:
            yield (*where, "privileged"), f"{label} is privileged"
        added = [_capability(c) for c in sequence(context, "capabilities", "add")]
        extra = sorted(set(added) - _BASELINE_CAPABILITIES)
        if extra:
            yield (*where, "capabilities", "add"), f"{label} adds {', '.join(extra)}"
        if mapping(context, "seccompProfile").get("type") == "Unconfined":
            yield (*where, "seccompProfile", "type"), f"{label}'s seccomp profile is Unconfined"
        for index, port in enumerate(sequence(container.spec, "ports")):
            if isinstance(port, dict) and port.get("hostPort") not in (None, 0):
                yield (*container.path, "ports", index, "hostPort"), f"{label} uses hostPort {port['hostPort']}"


def _restricted(template: PodTemplate):
    """(field path, problem) of each control restricted adds to baseline."""
    spec, path = template.spec, template.path
    pod_context = mapping(spec, "securityContext")
    for name, (index, volume) in template.volumes.items():
        kinds = [k for k in volume if k != "name"]
        if kinds and kinds[0] not in _RESTRICTED_VOLUMES and kinds[0] != "hostPath":
            yield (*path, "volumes", index, kinds[0]), f"volume {name} is a {kinds[0]} volume"
    containers = template.containers + template.init_containers
    contexts = [(c, mapping(c.spec, "securityContext")) for c in containers]
    # runAsNonRoot: true on the pod or on every container, and false on none.
    pod_non_root = pod_context.get("runAsNonRoot") is True
    for container, context in contexts:
        own = context.get("runAsNonRoot")
        if own is False or (own is not True and not pod_non_root):
            where = (*container.path, "securityContext") if own is False else (*path, "securityContext")
            label = template.container_label(container)
            yield (*where, "runAsNonRoot"), f"{label} may run as root (runAsNonRoot is not true)"
            break
    if pod_context.get("runAsUser") == 0:
        yield (*path, "securityContext", "runAsUser"), "the pod runs as user 0"
    for container, context in contexts:
        label = template.container_label(container)
        where = (*container.path, "securityContext")
        if context.get("runAsUser") == 0:
            yield (*where, "runAsUser"), f"{label} runs as user 0"
        if context.get("allowPrivilegeEscalation") is not False:
            yield (*where, "allowPrivilegeEscalation"), f"{label} does not set allowPrivilegeEscalation: false"
        dropped = {_capability(c) for c in sequence(context, "capabilities", "drop")}
        if "ALL" not in dropped:
            yield (*where, "capabilities", "drop"), f"{label} does not drop ALL capabilities"
        # Added capabilities beyond baseline's set are reported by _baseline already.
        added = {_capability(c) for c in sequence(context, "capabilities", "add")}
        within = sorted(added & _BASELINE_CAPABILITIES - {"NET_BIND_SERVICE"})
        if within:
            yield (*where, "capabilities", "add"), f"{label} adds {', '.join(within)}"
    pod_seccomp = mapping(pod_context, "seccompProfile").get("type")
    for container, context in contexts:
        seccomp = mapping(context, "seccompProfile").get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost", "Unconfined"):  # Unconfined: reported by _baseline
            yield (
                (*path, "securityContext", "seccompProfile"),
                (f"{template.container_label(container)} has no seccomp profile (RuntimeDefault or Localhost)"),
            )
            break


@rule(
    "pod-security-violation",
    "error",
    description="A pod template breaks the Pod Security level its namespace enforces",
    remediation="Make the pod meet the namespace's level (for restricted: runAsNonRoot: true, "
    "allowPrivilegeEscalation: false, capabilities drop [ALL], seccompProfile RuntimeDefault, no hostPath), "
    "or run it in a namespace whose pod-security.kubernetes.io/enforce level allows it.",
    docs="""A namespace labelled `pod-security.kubernetes.io/enforce: baseline` or `restricted` makes the API
      server refuse every pod that breaks that level of the Pod Security Standards. The workload itself is
      accepted (a Deployment, or the MPIJob), only its pods are refused, so an MPIJob waits forever for workers
      that are never created. Checked controls: for baseline, host namespaces, privileged containers,
      capabilities beyond the default set (IPC_LOCK and SYS_ADMIN, which EFA and some profilers ask for,
      are not in it), hostPath volumes, host ports and an Unconfined seccomp profile; restricted adds volume
      types, runAsNonRoot, user 0, allowPrivilegeEscalation: false, dropping ALL capabilities and a
      RuntimeDefault or Localhost seccomp profile. One finding per control and pod template. The namespace's
      label is read from the Namespace object among the inputs; exemptions in the cluster's admission
      configuration are not visible (EKS sets none).""",
    premise="A Namespace among the objects carries pod-security.kubernetes.io/enforce baseline or restricted, "
    "and a pod template lands in it.",
    consequence="job",
)
def pod_security_violation(scope: Scope):
    levels = enforced_levels(scope)
    if not levels:
        return
    for template in scope.pod_templates:
        level = levels.get(scope.namespace_of(template.owner))
        if level is None:
            continue
        problems = list(_baseline(template))
        if level == "restricted":
            problems += list(_restricted(template))
        for path, problem in problems:
            namespace = scope.namespace_of(template.owner)
            yield Finding(
                template.owner,
                f"{template.label}: {problem}, which namespace {namespace}'s Pod Security level {level} refuses",
                path,
            )
