"""One case that gives each notice of diff's catalogue and one that does not (tests/test_notices.py
runs them; a meta-test fails when a notice kind has no case of either kind).

A case returns the two renders, base and head, as lists of environments built in Python
(tests/diff_objects.py); a case that gives its notice names every object the notice is about.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from diff_objects import annotated, claim, cluster_config, cluster_queue, environment, mpijob, storage_class

GIVES, NOT = "gives", "not"
SC, PVC, JOB = "StorageClass fsx", "PersistentVolumeClaim t/data", "MPIJob t/train"
CLUSTER = "ClusterConfig c"
QUEUE = "training"  # the LocalQueue a queued MPIJob names


@dataclass
class NoticeCase:
    notice: str
    outcome: str
    name: str
    make: Callable
    expect: list[str]  # the resource of each notice of this kind, in order

    @property
    def id(self) -> str:
        return f"{self.notice}-{self.outcome}-{self.name}"


CASES: list[NoticeCase] = []


def case(notice: str, outcome: str, *expect: str):
    if (outcome == GIVES) != bool(expect):
        raise ValueError(f"{notice}: a case that gives the notice names its objects, one that does not none")

    def register(make):
        CASES.append(NoticeCase(notice, outcome, make.__name__, make, list(expect)))
        return make

    return register


def change(before: list[dict], after: list[dict], **options):
    return [environment(before, **options)], [environment(after, **options)]


def namespace(name: str = "t") -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def config_map(name: str = "settings") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "t"},
        "data": {"mode": "fast"},
    }


# --- in place -------------------------------------------------------------------------------------


@case("immutable-field", GIVES, SC)
def storage_class_parameters_change():
    return change([storage_class()], [storage_class(parameters={"deploymentType": "PERSISTENT_2"})])


@case("immutable-field", NOT)
def storage_class_expansion_changes():
    return change([storage_class()], [storage_class(allowVolumeExpansion=False)])


@case("volume-expands", GIVES, PVC)
def claim_grows_on_an_expandable_class():
    return change([storage_class(), claim("1200Gi")], [storage_class(), claim("2400Gi")])


@case("volume-expands", NOT)
def claim_grows_on_a_fixed_class():
    fixed = storage_class(allowVolumeExpansion=False)
    return change([fixed, claim("1200Gi")], [fixed, claim("2400Gi")])


@case("volume-cannot-expand", GIVES, PVC)
def claim_outgrows_its_fixed_class():
    return claim_grows_on_a_fixed_class()


@case("volume-cannot-expand", NOT)
def claim_grows_where_it_may():
    return claim_grows_on_an_expandable_class()


@case("running-job-keeps-spec", GIVES, JOB)
def mpijob_gets_more_workers():
    return change([mpijob(2, 8)], [mpijob(4, 8)])


@case("running-job-keeps-spec", GIVES, JOB)
def mpijob_gets_more_workers_in_two_environments():
    """The advice is the same for every MPIJob: given once for the whole change."""
    return (
        [environment([mpijob(2, 8)], name="dev"), environment([mpijob(2, 8)])],
        [environment([mpijob(4, 8)], name="dev"), environment([mpijob(4, 8)])],
    )


@case("running-job-keeps-spec", NOT)
def mpijob_gets_a_label():
    labelled = mpijob(2, 8)
    labelled["metadata"]["labels"] = {"team": "vision"}
    return change([mpijob(2, 8)], [labelled])


@case("applied-by-eksctl", GIVES, CLUSTER)
def node_group_grows():
    return [environment([], cluster=cluster_config(2))], [environment([], cluster=cluster_config(4))]


@case("applied-by-eksctl", GIVES, CLUSTER)
def node_groups_grow_in_two_environments():
    return (
        [environment([], cluster=cluster_config(2), name="dev"), environment([], cluster=cluster_config(2))],
        [environment([], cluster=cluster_config(4), name="dev"), environment([], cluster=cluster_config(4))],
    )


@case("applied-by-eksctl", NOT)
def cluster_config_unchanged():
    return [environment([], cluster=cluster_config(2))], [environment([config_map()], cluster=cluster_config(2))]


@case("node-group-replaced", GIVES, CLUSTER)
def node_group_changes_instance_type():
    return ([environment([], cluster=cluster_config(2))], [environment([], cluster=cluster_config(2, "p5.48xlarge"))])


@case("node-group-replaced", NOT)
def node_group_changes_size_only():
    return node_group_grows()


@case("change-not-applied", GIVES, SC)
def change_to_an_object_flux_only_creates():
    new = storage_class(parameters={"deploymentType": "PERSISTENT_2"})
    return change([annotated(storage_class(), ssa="IfNotPresent")], [annotated(new, ssa="IfNotPresent")])


@case("change-not-applied", NOT)
def change_to_an_object_flux_updates():
    return storage_class_parameters_change()


# --- deletions ------------------------------------------------------------------------------------


@case("claim-deleted", GIVES, PVC)
def claim_removed_where_flux_prunes():
    return change([storage_class(), claim()], [storage_class()])


@case("claim-deleted", NOT)
def claim_removed_where_flux_does_not_prune():
    return change([storage_class(), claim()], [storage_class()], prune=False)


@case("claim-released", GIVES, PVC)
def claim_removed_from_a_retaining_class():
    retain = storage_class(reclaimPolicy="Retain")
    return change([retain, claim()], [retain])


@case("claim-released", NOT)
def claim_removed_from_a_deleting_class():
    return claim_removed_where_flux_prunes()


@case("fsx-class-removed-with-claims", GIVES, SC)
def fsx_class_removed_with_its_claim():
    return change([storage_class(), claim()], [])


@case("fsx-class-removed-with-claims", NOT)
def fsx_class_removed_while_its_claim_stays_behind():
    return change([storage_class(), annotated(claim(), prune="disabled")], [])


@case("fsx-class-removed", GIVES, SC)
def fsx_class_removed_alone():
    return change([storage_class()], [])


@case("fsx-class-removed", NOT)
def retaining_fsx_class_removed():
    return change([storage_class(reclaimPolicy="Retain")], [])


@case("namespace-deleted", GIVES, "Namespace t")
def namespace_removed_where_flux_prunes():
    return change([namespace()], [])


@case("namespace-deleted", NOT)
def namespace_removed_where_flux_does_not_prune():
    return change([namespace()], [], prune=False)


@case("job-stops", GIVES, JOB)
def mpijob_removed():
    return change([mpijob(2, 8)], [])


@case("job-stops", NOT)
def mpijob_that_opts_out_of_pruning_removed():
    return change([annotated(mpijob(2, 8), prune="disabled")], [])


def _moved(doc: dict, **options):
    """`doc` in training before, in infrastructure after."""
    before, after = environment([doc], **options), environment([], **options)
    moved = copy.deepcopy(before.kustomizations[1].objects[0])
    moved.source = "infrastructure"
    after.kustomizations[0].objects.append(moved)
    return [before], [after]


@case("moves-between-kustomizations", GIVES, "ConfigMap t/settings")
def config_map_moves():
    return _moved(config_map())


@case("moves-between-kustomizations", NOT)
def config_map_that_opts_out_of_pruning_moves():
    return _moved(annotated(config_map(), prune="disabled"))


@case("moves-between-kustomizations-data-loss", GIVES, PVC)
def claim_moves():
    return _moved(claim())  # its class is not in the environment: deleting the claim may delete the volume


@case("moves-between-kustomizations-data-loss", NOT)
def claim_moves_where_flux_does_not_prune():
    return _moved(claim(), prune=False)


@case("left-on-cluster", GIVES, "Kustomization training")
def config_map_removed_where_flux_does_not_prune():
    return change([config_map()], [], prune=False)


@case("left-on-cluster", NOT)
def config_map_removed_where_flux_prunes():
    return change([config_map()], [])


# --- environments ---------------------------------------------------------------------------------


@case("environment-added", GIVES, "environment qa")
def environment_qa_appears():
    return [environment([config_map()])], [environment([config_map()]), environment([config_map()], name="qa")]


@case("environment-added", NOT)
def environment_changes():
    return change([config_map()], [config_map("other")])


@case("environment-removed", GIVES, "environment qa")
def environment_qa_goes():
    return environment_qa_appears()[::-1]


@case("environment-removed", NOT)
def environment_stays():
    return environment_changes()


@case("gpus-exceed-capacity", GIVES, "GPU capacity")
def workers_outgrow_the_node_group():
    return [environment([mpijob(2, 8)], cluster=cluster_config(2))], [
        environment([mpijob(4, 8)], cluster=cluster_config(2))
    ]


@case("gpus-exceed-capacity", NOT)
def node_group_grows_with_the_workers():
    return [environment([mpijob(2, 8)], cluster=cluster_config(2))], [
        environment([mpijob(4, 8)], cluster=cluster_config(4))
    ]


@case("gpus-exceed-capacity", GIVES, "GPU capacity")
def queued_job_alone_outgrows_the_node_group():
    return [environment([cluster_queue(16), mpijob(2, 8, queue=QUEUE)], cluster=cluster_config(2))], [
        environment([cluster_queue(16), mpijob(4, 8, queue=QUEUE)], cluster=cluster_config(2))
    ]


@case("gpus-exceed-capacity", NOT)
def queued_jobs_that_each_fit_take_turns():
    first = mpijob(2, 8, queue=QUEUE)
    second = mpijob(2, 8, name="train-2", queue=QUEUE)
    return [environment([cluster_queue(16), first], cluster=cluster_config(2))], [
        environment([cluster_queue(16), first, second], cluster=cluster_config(2))
    ]


@case("gpu-capacity-changed", GIVES, "GPU capacity")
def node_group_and_quota_grow():
    return [environment([cluster_queue(16)], cluster=cluster_config(2))], [
        environment([cluster_queue(32)], cluster=cluster_config(4))
    ]


@case("gpu-capacity-changed", NOT)
def queued_job_grows_within_the_quota():
    return [environment([cluster_queue(16), mpijob(1, 8, queue=QUEUE)], cluster=cluster_config(2))], [
        environment([cluster_queue(16), mpijob(2, 8, queue=QUEUE)], cluster=cluster_config(2))
    ]
