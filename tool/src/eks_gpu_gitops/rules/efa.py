"""EFA rules: Elastic Fabric Adapter requests against the node groups that provide them."""

from __future__ import annotations

from ..model import EFA, PodTemplate, Scope, plural
from ..model.mpi import EFA_ENVIRONMENT, exported_variables, launch_tokens, mpijobs, parse_launch, replica_templates
from ..model.plugins import EFA_PLUGIN, plugin_installed
from .registry import Finding, category

rule = category("EFA")


def efa_templates(scope: Scope) -> list[PodTemplate]:
    return [t for t in scope.pod_templates if t.request(EFA) > 0]


def _provides_efa(group) -> bool:
    return group.efa_enabled and (group.smallest("efa_interfaces") or 0) > 0


def _efa_container(template: PodTemplate):
    return next(c for c in template.containers if c.request(EFA) > 0)


@rule(
    "efa-without-efa-node-group",
    "error",
    requires=("cluster",),
    description="A pod requests EFA interfaces on nodes without efaEnabled or without EFA hardware",
    remediation="Set efaEnabled: true on the pod's node group (an EFA-capable instance type), or remove "
    "vpc.amazonaws.com/efa from the pod.",
    docs="""Only nodes of an `efaEnabled` node group of an EFA-capable instance type advertise
      `vpc.amazonaws.com/efa`; a pod that requests it anywhere else stays Pending.""",
)
def efa_without_efa_node_group(scope: Scope):
    for template in efa_templates(scope):
        _, groups = scope.placement(template)
        if groups and not any(_provides_efa(g) for g in groups):
            names = ", ".join(f"{g.describe()}{'' if g.efa_enabled else ' without efaEnabled'}" for g in groups)
            yield Finding(
                template.owner,
                f"{template.label} requests vpc.amazonaws.com/efa but runs on {names}",
                (*_efa_container(template).path, "resources"),
            )


@rule(
    "efa-request-exceeds-interfaces",
    "error",
    requires=("cluster",),
    description="A pod requests more EFA interfaces than its instance type has",
    remediation="Request at most the instance type's EFA interfaces (p4d 4, p5 32, p5en 16, g5/g6 1).",
    docs="""eksctl creates one EFA interface per network card of the instance, and the EFA device plugin
      advertises exactly that many; a larger request can never be met. Figures come from the instance
      catalogue.""",
)
def efa_request_exceeds_interfaces(scope: Scope):
    for template in efa_templates(scope):
        wanted = template.request(EFA)
        _, groups = scope.placement(template)
        usable = [g for g in groups if _provides_efa(g)]
        if usable and all(g.smallest("efa_interfaces") < wanted for g in usable):
            sizes = ", ".join(f"{g.describe()} has {g.smallest('efa_interfaces')}" for g in usable)
            yield Finding(
                template.owner,
                f"{template.label} requests {plural(wanted, 'EFA interface')} but {sizes}",
                (*_efa_container(template).path, "resources"),
            )


@rule(
    "efa-device-plugin-missing",
    "error",
    requires=("environment",),
    description="Pods request vpc.amazonaws.com/efa but the environment installs no EFA device plugin",
    remediation="Add overlays/base/device-plugins/efa to the environment's infrastructure overlay.",
    docs="""eksctl (v0.230.0) installs EFA plugin v0.5.4 as `kube-system/aws-efa-k8s-device-plugin` with every
      efaEnabled node group and has no switch to skip it; without a GitOps copy of the same name that plugin
      is never upgraded or restored by Flux.""",
)
def efa_device_plugin_missing(scope: Scope):
    if plugin_installed(scope, EFA_PLUGIN):
        return
    for template in efa_templates(scope):
        yield Finding(
            template.owner,
            f"{template.label} requests vpc.amazonaws.com/efa, which nothing in this environment advertises",
            (*_efa_container(template).path, "resources"),
        )


@rule(
    "efa-node-group-not-single-az",
    "error",
    requires=("cluster",),
    description="An efaEnabled node group is not pinned to exactly one availability zone",
    remediation="Give the node group exactly one availabilityZones entry (or one subnet), the zone of the FSx subnet.",
    docs="""eksctl rejects an efaEnabled group with more than one zone or subnet, and one with none spreads
      over every cluster subnet while its placement group (and EFA traffic) stays within one zone.""",
)
def efa_node_group_not_single_az(scope: Scope):
    for group in scope.node_groups:
        if not group.efa_enabled:
            continue
        zones, subnets = group.zones, group.subnets
        if len(zones) + len(subnets) != 1 and not (len(zones) == 1 and len(subnets) == 1):
            yield Finding(
                scope.cluster_config,
                f"efaEnabled {group.describe()} has {plural(len(zones), 'availability zone')} and "
                f"{plural(len(subnets), 'subnet')}",
                (*group.path, "availabilityZones"),
            )


@rule(
    "efa-instance-type-unsupported",
    "error",
    requires=("cluster",),
    description="A node group sets efaEnabled on an instance type without EFA",
    remediation="Choose an EFA-capable instance type (for example p4d.24xlarge, p5.48xlarge, g5.8xlarge and "
    "larger) or set efaEnabled: false.",
    docs="""eksctl looks the instance type up and refuses to create an efaEnabled node group whose type has no
      EFA; smaller g4dn/g5/g6 sizes and p3 (except p3dn) have none.""",
)
def efa_instance_type_unsupported(scope: Scope):
    for group in scope.node_groups:
        if group.efa_enabled and group.smallest("efa_interfaces") == 0:
            yield Finding(
                scope.cluster_config,
                f"efaEnabled {group.describe()}: the instance type has no EFA",
                (*group.path, "efaEnabled"),
            )


def _huge_pages_off(template: PodTemplate, scope: Scope) -> bool:
    """FI_EFA_USE_HUGE_PAGE=0 in the pod's env, or passed by the MPIJob launcher's mpirun -x."""
    wanted = "FI_EFA_USE_HUGE_PAGE"
    for container in template.containers:
        if any(e.get("name") == wanted and str(e.get("value")) == "0" for e in container.env):
            return True
    if template.role:
        for other in scope.pod_templates:
            if other.owner is template.owner and other.role == "Launcher":
                for container in other.containers:
                    tokens, _ = launch_tokens(container)
                    if f"{wanted}=0" in tokens or any(
                        e.get("name") == wanted and str(e.get("value")) == "0" for e in container.env
                    ):
                        return True
    return False


@rule(
    "efa-huge-pages-unset",
    "warning",
    description="A pod uses EFA without huge pages and without FI_EFA_USE_HUGE_PAGE=0",
    remediation="Request hugepages-2Mi (requests = limits, for example 5120Mi) or pass FI_EFA_USE_HUGE_PAGE=0 "
    "to every rank (mpirun -x FI_EFA_USE_HUGE_PAGE=0).",
    docs="""libfabric's EFA provider uses huge pages by default. On nodes without huge pages reserved for the
      pod, forks (data-loader workers) fail with ENOMEM; the aws-ofi-nccl guidance is to request huge pages or
      turn them off.""",
)
def efa_huge_pages_unset(scope: Scope):
    for template in efa_templates(scope):
        if template.request("hugepages-2Mi") > 0 or template.request("hugepages-1Gi") > 0:
            continue
        if not _huge_pages_off(template, scope):
            yield Finding(
                template.owner,
                f"{template.label} requests EFA without huge pages or FI_EFA_USE_HUGE_PAGE=0",
                (*_efa_container(template).path, "resources"),
            )


@rule(
    "efa-environment-missing",
    "error",
    description="An MPIJob whose workers use EFA does not pass the EFA environment to its ranks",
    remediation="Add "
    + " ".join(f"-x {name}={value}" for name, value in EFA_ENVIRONMENT.items())
    + " to the launcher's mpirun (the generators write them for EFA environments).",
    docs="""Without `NCCL_NET=Libfabric` NCCL quietly falls back to TCP sockets when the aws-ofi-nccl plugin
      cannot use EFA (a missing library, no interface in the pod): the job runs at a fraction of the speed
      and only `NCCL_DEBUG=INFO` would show it. With it NCCL stops at start-up with an error instead.
      `FI_PROVIDER=efa` keeps libfabric on the EFA provider, as AWS's EKS nccl-tests job does. The values
      are passed with mpirun's `-x NAME=value`, or `-x NAME` with the value in the launcher's env.""",
)
def efa_environment_missing(scope: Scope):
    for job in mpijobs(scope.objects):
        templates = replica_templates(job)
        worker, launcher = templates.get("Worker"), templates.get("Launcher")
        if not worker or not launcher or worker.request(EFA) <= 0:
            continue
        for container in launcher.containers:
            tokens, path_of = launch_tokens(container)
            launch = parse_launch(tokens)
            if launch is None:
                continue
            exported = exported_variables(container)
            missing = [f"{n}={v}" for n, v in EFA_ENVIRONMENT.items() if exported.get(n) != v]
            if missing:
                interfaces = plural(int(worker.request(EFA)), "EFA interface")
                yield Finding(
                    job,
                    f"{launcher.container_label(container)} starts workers with {interfaces} each but does not "
                    f"export {', '.join(missing)}",
                    path_of(launch.launcher),
                )
