"""EFA rules: Elastic Fabric Adapter requests against the node groups that provide them."""

from __future__ import annotations

from ..model import EFA, PodTemplate, Scope, mapping, plural, sequence
from ..model.mpi import launch_tokens, mpijobs, parse_launch, replica_templates
from ..model.placement import (
    builtin_plugin_serves,
    efa_zone_spread,
    placement_known,
    taints_eksctl_efa_plugin_misses,
)
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
      `vpc.amazonaws.com/efa` (eksctl v0.230.0 gives a node EFA interfaces only for `efaEnabled`,
      `pkg/cfn/builder/network_interfaces.go`); a pod that requests it anywhere else stays Pending. Skipped
      where Karpenter, Fargate or EKS Auto Mode can add other nodes, or the pod selects on a node label the
      ClusterConfig does not set.""",
    premise="The ClusterConfig lists every node the pod can run on (no Karpenter, Fargate or Auto Mode) and "
    "fixes the node labels it selects on.",
    consequence="job",
)
def efa_without_efa_node_group(scope: Scope):
    for template in efa_templates(scope):
        if not placement_known(scope, template):
            continue
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
    docs="""eksctl creates one EFA interface per network card of the instance (the fewest of the group's
      instance types, v0.230.0 `pkg/cfn/builder/network_interfaces.go`), and the EFA device plugin advertises
      exactly that many; a larger request can never be met. Figures come from the instance catalogue.
      Skipped where Karpenter, Fargate or EKS Auto Mode can add other nodes.""",
    premise="The ClusterConfig lists every node the pod can run on (no Karpenter, Fargate or Auto Mode), fixes "
    "the node labels it selects on, and the efaEnabled groups it admits are of known instance types.",
    consequence="job",
)
def efa_request_exceeds_interfaces(scope: Scope):
    for template in efa_templates(scope):
        if not placement_known(scope, template):
            continue
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
    requires=("environment", "cluster"),
    description="Pods request vpc.amazonaws.com/efa on nodes no EFA device plugin serves",
    remediation="Deploy the EFA device plugin in the environment (overlays/base/device-plugins/efa in this "
    "template) as kube-system/aws-efa-k8s-device-plugin, tolerating the EFA node groups' taints.",
    docs="""eksctl (v0.230.0, `pkg/eks/tasks.go`) installs its own EFA device plugin,
      `kube-system/aws-efa-k8s-device-plugin`, with every efaEnabled node group, and has no switch to skip
      it. But that copy tolerates only the taints `CriticalAddonsOnly` and `aws.amazon.com/efa:NoSchedule`
      (`pkg/addons/assets/efa-device-plugin.yaml`; eksctl adds none for the groups' taints), so on a group
      tainted otherwise (the usual `nvidia.com/gpu:NoSchedule`) it never runs, nothing advertises
      `vpc.amazonaws.com/efa`, and pods that request it stay Pending. Reported where the environment deploys
      no EFA plugin of its own and every node group an EFA pod can run on is such a group. (Elsewhere
      eksctl's copy serves, outside GitOps: `device-plugin-duplicate` describes it.)""",
    premise="The whole environment and its ClusterConfig are visible, the environment deploys no EFA device "
    "plugin, and a pod requesting vpc.amazonaws.com/efa can only run on node groups with a taint the copy "
    "eksctl installs does not tolerate.",
    consequence="job",
)
def efa_device_plugin_missing(scope: Scope):
    if plugin_installed(scope, EFA_PLUGIN):
        return
    for template in efa_templates(scope):
        if not placement_known(scope, template):
            continue
        _, groups = scope.placement(template)
        efa = [g for g in groups if g.efa_enabled]
        if efa and not any(builtin_plugin_serves(g, EFA) for g in efa):
            taints = sorted({str(t) for g in efa for t in taints_eksctl_efa_plugin_misses(g)})
            yield Finding(
                template.owner,
                f"{template.label} requests vpc.amazonaws.com/efa, which nothing advertises: the environment "
                f"deploys no EFA device plugin, and the one eksctl installs does not tolerate {', '.join(taints)}",
                (*_efa_container(template).path, "resources"),
            )


@rule(
    "efa-node-group-not-single-az",
    "error",
    requires=("cluster",),
    description="An efaEnabled node group is not pinned to exactly one availability zone",
    remediation="Give the node group exactly one availabilityZones entry (or one subnet): the zone of the FSx "
    "file system and of the instance capacity you expect.",
    docs="""eksctl (v0.230.0, `pkg/apis/eksctl.io/v1alpha5/validation.go`) refuses an efaEnabled node group
      with more than one availability zone or subnet: "efaEnabled nodegroups must have only one subnet or one
      availability zone". A managed group that names none is accepted, but eksctl then gives it a subnet in every
      zone of the cluster (`pkg/cfn/builder/nodegroup.go`, AssignSubnets) and, unless it has a `placement` or a
      `capacityReservation`, a cluster placement group of its own (`NodeGroupPlacementGroup`,
      `pkg/cfn/builder/managed_launch_template.go`), which holds instances of one zone only. The first node
      settles the zone; EC2 refuses the launches the Auto Scaling group makes in the others ("the placement group
      is in use in another availability zone", hashicorp/terraform#8064), and EKS refuses the group's updates
      ("Instances in the Placement Group must be launched in the <zone> Availability Zone",
      terraform-aws-eks#3044): a version or launch template update of the group fails, which makes it an error.
      reserved-capacity-at-risk, a warning, reports the similar spread of a group that targets a reservation in
      one zone: eksctl gives a managed group with a reservation no placement group (eksctl#8220), so its
      launches succeed in the reservation's zone after retries and no update is refused. A self-managed group is
      no EKS node group, so nothing refuses its updates; and a group in a placement group of the user's
      (`placement`), whose strategy is not visible, is not reported either.""",
    premise="An efaEnabled node group of the ClusterConfig lists more than one availability zone or subnet, or is "
    "a managed group that names none and has neither placement nor capacityReservation (so eksctl spreads it, with "
    "a cluster placement group, over every zone of the cluster).",
    consequence="ec2",
)
def efa_node_group_not_single_az(scope: Scope):
    for group in scope.node_groups:
        field = efa_zone_spread(group)
        if field:
            yield Finding(
                scope.cluster_config,
                f"efaEnabled {group.describe()} has {plural(len(group.zones), 'availability zone')} and "
                f"{plural(len(group.subnets), 'subnet')}, which eksctl refuses",
                (*group.path, field),
            )
        elif field == "":
            yield Finding(
                scope.cluster_config,
                f"efaEnabled {group.describe()} names no availability zone or subnet, so eksctl spreads it and "
                "its cluster placement group over every zone of the cluster: EC2 refuses launches outside the first "
                "node's zone, and EKS refuses the group's updates",
                group.path,
            )


@rule(
    "efa-instance-type-unsupported",
    "error",
    requires=("cluster",),
    description="A node group sets efaEnabled on an instance type without EFA",
    remediation="Choose an EFA-capable instance type (for example p4d.24xlarge, p5.48xlarge, g5.8xlarge and "
    "larger) or set efaEnabled: false.",
    docs="""eksctl looks the instance types up and refuses to create an efaEnabled node group when one of them
      has no EFA ("instance type ... does not support EFA", v0.230.0 `pkg/cfn/builder/network_interfaces.go`);
      smaller g4dn/g5/g6 sizes and p3 (except p3dn) have none.""",
    premise="An efaEnabled node group of the ClusterConfig has an instance type the catalogue knows to lack EFA.",
    consequence="eksctl",
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
      pod, forks (data-loader workers) fail with ENOMEM; the aws-ofi-nccl guidance (v1.21.1,
      `doc/efa-env-var.md`) is to request huge pages or turn them off.""",
    premise="A pod requests vpc.amazonaws.com/efa.",
    consequence="risk",
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


def _rank_settings(job, launcher: PodTemplate) -> dict[str, tuple[str, tuple]]:
    """name -> (value, field path) of each variable the launcher surely passes to every rank (the last wins):
    mpirun's `-x NAME=value` or `-x NAME` with the launcher's own value, and with Intel MPI or MPICH (whose Hydra
    passes the launcher's whole environment) the launcher's env."""
    found = {}
    for container in launcher.containers[:1]:
        own = {
            str(e.get("name")): (e.get("value"), i)
            for i, e in enumerate(sequence(container.spec, "env"))  # env's own indices, for the field path
            if isinstance(e, dict) and "value" in e
        }
        tokens, path_of = launch_tokens(container)
        launch = parse_launch(tokens)
        for index, operands in launch.options if launch else []:
            flag, equals, inline = tokens[index].partition("=")
            if flag not in ("-x", "--x") or not (equals or operands):
                continue
            word = inline if equals else tokens[operands[0]]
            name, has_value, value = word.partition("=")
            if has_value:
                found[name] = (value, path_of(index if equals else operands[0]))
            elif name in own and own[name][0] is not None:
                found[name] = (str(own[name][0]), (*container.path, "env", own[name][1], "value"))
        if mapping(job.doc, "spec").get("mpiImplementation") in ("Intel", "MPICH"):
            found |= {n: (str(v), (*container.path, "env", i, "value")) for n, (v, i) in own.items() if v is not None}
    return found


def _efa_jobs(scope: Scope):
    """(MPIJob, what its workers' message says, its rank settings) of each MPIJob whose workers request EFA."""
    for job in mpijobs(scope.objects):
        templates = replica_templates(job)
        worker, launcher = templates.get("Worker"), templates.get("Launcher")
        if worker and launcher and worker.request(EFA) > 0:
            interfaces = plural(worker.request(EFA), "EFA interface")
            yield job, f"workers request {interfaces} each", _rank_settings(job, launcher)


def _net_and_plugin(settings: dict) -> tuple[str, str]:
    """NCCL_NET and NCCL_NET_PLUGIN as NCCL compares them (strcasecmp), "" when unset."""
    return settings.get("NCCL_NET", ("",))[0].lower(), settings.get("NCCL_NET_PLUGIN", ("",))[0].lower()


def _nccl_stops(settings: dict) -> str:
    """Why NCCL finds no network it can initialise on EFA nodes with these settings, or "" when it does."""
    net, plugin = _net_and_plugin(settings)
    if net == "ib":
        return (
            "NCCL_NET lets NCCL try only its IB transport, which finds no device on EC2 (it skips devices whose "
            "link layer is neither InfiniBand nor Ethernet, and EFA's is unspecified), so NCCL stops"
        )
    if net and net != "socket" and plugin == "none":
        return (
            "NCCL_NET_PLUGIN=none loads no external plugin, so NCCL has no network of that name (only IB and "
            "Socket) and stops"
        )
    return ""


def _keeps_nccl_off_efa(settings: dict) -> list[tuple[str, str]]:
    """(name, why) of each setting that keeps NCCL off EFA while it still runs, over TCP sockets or another
    libfabric provider."""
    net, plugin = _net_and_plugin(settings)
    found = []
    if net == "socket":
        found.append(("NCCL_NET", "NCCL then sends over TCP sockets instead of the aws-ofi-nccl plugin"))
    if plugin == "none" and not net:
        found.append(
            (
                "NCCL_NET_PLUGIN",
                "NCCL then loads no network plugin, so not aws-ofi-nccl, and falls back to TCP sockets",
            )
        )
    if "FI_PROVIDER" in settings:
        value = settings["FI_PROVIDER"][0]
        providers = value.lstrip("^").split(",")
        if ("efa" in providers) == value.startswith("^"):
            found.append(
                ("FI_PROVIDER", "aws-ofi-nccl then uses another libfabric provider, or NCCL falls back to TCP sockets")
            )
    return found


_NCCL_NETWORKS = """NCCL needs no setting to use EFA: with `NCCL_NET_PLUGIN` unset it loads `libnccl-net.so` and
      tries it before its internal IB and Socket transports (NVIDIA/nccl v2.30.7-1, `src/plugin/net.cc`
      initPluginLibsOnceFunc, ncclNetInit), and aws-ofi-nccl installs itself under that name (aws/aws-ofi-nccl
      v1.21.1, `src/Makefile.am`), calls itself `Libfabric` (`src/nccl_ofi_interface_nvidia.cpp`) and picks
      libfabric's efa provider on EC2 when `FI_PROVIDER` is unset (`src/platform-aws.cpp`); AWS's own p5 nccl-tests
      jobs set neither. `NCCL_NET` names the one network NCCL may use (compared without case): when that one
      cannot start, ncclNetInit fails with "Failed to initialize any NET plugin" and so does every communicator.
      Read from what surely reaches every rank: mpirun's `-x NAME=value`, `-x NAME` with the launcher's value,
      and the launcher's env with Intel MPI or MPICH."""


@rule(
    "nccl-network-unavailable",
    "error",
    description="An MPIJob whose workers use EFA tells NCCL to use a network it cannot start there",
    remediation="Remove NCCL_NET from the launcher, or set it to Libfabric (the aws-ofi-nccl plugin) with "
    "NCCL_NET_PLUGIN unset.",
    docs=_NCCL_NETWORKS
    + """
      Reported where the named network cannot start on EFA nodes: `IB`, NCCL's InfiniBand/RoCE transport, which
      skips every device whose link layer is neither InfiniBand nor Ethernet (`src/transport/net_ib/init.cc`,
      ncclIbInit) while the EFA driver reports an unspecified one (Linux, drivers/infiniband/hw/efa
      efa_port_link_layer) and EC2 has no other RDMA device, so it finds none; or any name but `Socket` beside
      `NCCL_NET_PLUGIN=none`, which loads no external plugin, so `Libfabric` does not exist. The job's first
      collective never runs.""",
    premise="An MPIJob's workers request vpc.amazonaws.com/efa and its launcher passes every rank NCCL_NET=IB, or "
    "an NCCL_NET other than Socket together with NCCL_NET_PLUGIN=none.",
    consequence="job",
)
def nccl_network_unavailable(scope: Scope):
    for job, workers, settings in _efa_jobs(scope):
        why = _nccl_stops(settings)
        if why:
            value, path = settings["NCCL_NET"]
            yield Finding(job, f"{workers}, but the launcher passes NCCL_NET={value} to every rank: {why}", path)


@rule(
    "efa-not-used-by-nccl",
    "warning",
    description="An MPIJob whose workers use EFA tells NCCL or libfabric not to use it, and runs slower",
    remediation="Remove the setting from the launcher (NCCL_NET=Socket, NCCL_NET_PLUGIN=none, an FI_PROVIDER "
    "without efa); to make NCCL fail rather than fall back, pass -x NCCL_NET=Libfabric instead.",
    docs=_NCCL_NETWORKS
    + """
      Reported where a setting keeps NCCL off EFA but the job still runs, at a fraction of the bandwidth:
      `NCCL_NET=Socket` (TCP), `NCCL_NET_PLUGIN=none` without `NCCL_NET` (NCCL loads no plugin, its IB
      transport finds no device, and it falls back to sockets), or an `FI_PROVIDER` without `efa` (aws-ofi-nccl
      then takes that provider, or NCCL falls back to sockets). A setting with which NCCL stops instead is
      nccl-network-unavailable's error. `NCCL_NET=Libfabric` (what the generators write) is not needed, but
      makes NCCL stop with an error instead of falling back to sockets when the plugin cannot use EFA.""",
    premise="An MPIJob's workers request vpc.amazonaws.com/efa and its launcher passes every rank NCCL_NET=Socket, "
    "NCCL_NET_PLUGIN=none without NCCL_NET, or an FI_PROVIDER without efa.",
    consequence="performance",
)
def efa_not_used_by_nccl(scope: Scope):
    for job, workers, settings in _efa_jobs(scope):
        for name, why in _keeps_nccl_off_efa(settings):
            value, path = settings[name]
            yield Finding(job, f"{workers}, but the launcher passes {name}={value} to every rank: {why}", path)
