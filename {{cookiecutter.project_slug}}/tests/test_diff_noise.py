"""Notices that agree with each other and say what the cluster really does: a namespace's claims keep their
volumes as their class says, a removed environment keeps its nodes, advice that is the same for every object
is given once per diff."""

from __future__ import annotations

from diff_objects import claim, cluster_config, environment, mpijob, storage_class

from gitops_tools.diff import impact
from gitops_tools.diff.model import Side
from gitops_tools.diff.report import build_report

SIDE = Side("x", "x", "x")
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}}


def notices(base: list, head: list) -> list:
    return [notice for _, notice in build_report(SIDE, base, SIDE, head).notices]


def test_the_namespace_notice_says_what_the_claim_notice_says_about_the_volume():
    retain = storage_class(reclaimPolicy="Retain")
    found = notices([environment([retain, NAMESPACE, claim()])], [environment([retain])])
    by_id = {n.id: n for n in found}
    assert "is kept (reclaimPolicy Retain)" in by_id["claim-released"].message
    kept = "PersistentVolumeClaim/data is deleted, and its FSx for Lustre file system is kept (reclaimPolicy Retain)"
    assert kept in by_id["namespace-deleted"].message
    assert "volumes included" not in by_id["namespace-deleted"].message

    delete = notices([environment([storage_class(), NAMESPACE, claim()])], [environment([storage_class()])])
    namespace = next(n for n in delete if n.id == "namespace-deleted")
    assert "its FSx for Lustre file system and all data on it are deleted (reclaimPolicy Delete)" in namespace.message


def test_a_namespace_without_claims_names_none():
    found = notices([environment([NAMESPACE])], [environment([])])
    assert [n.id for n in found] == ["namespace-deleted"]
    assert "PersistentVolumeClaim" not in found[0].message


def test_a_removed_environment_keeps_its_node_capacity_until_eksctl_deletes_the_cluster():
    before = environment([mpijob(2, 8)], cluster=cluster_config(2), name="qa")
    gpus, quota, nodes = impact.figures(before, None)
    assert (gpus.before, gpus.after) == (16, 0)
    assert (nodes.before, nodes.after, nodes.changed) == (16, 16, False)
    assert "eksctl delete cluster" in nodes.after_detail
    # An environment that appears still starts from 0 nodes.
    _, _, new = impact.figures(None, before)
    assert (new.before, new.after) == (0, 16)
    report = build_report(SIDE, [before], SIDE, [])
    assert not [n for _, n in report.notices if n.id == "gpu-capacity-changed"]


def test_advice_that_is_the_same_for_every_object_is_given_once_naming_them_all():
    base = [environment([mpijob(2, 8)], name="dev"), environment([mpijob(2, 8)], name="prod")]
    head = [environment([mpijob(4, 8)], name="dev"), environment([mpijob(4, 8)], name="prod")]
    report = build_report(SIDE, base, SIDE, head)
    running = [(env, n) for env, n in report.notices if n.id == "running-job-keeps-spec"]
    assert [(env, n.resource) for env, n in running] == [("dev", "MPIJob t/train")]
    assert "The same holds for MPIJob t/train in prod" in running[0][1].message
    # Notices about one object's own data are never folded.
    claims = notices(
        [environment([storage_class(), claim()], name="dev"), environment([storage_class(), claim()])],
        [environment([storage_class()], name="dev"), environment([storage_class()])],
    )
    assert [n.id for n in claims].count("claim-deleted") == 2
