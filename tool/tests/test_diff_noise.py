"""Notices that agree with each other and say what the cluster really does: a namespace's claims keep their
volumes as their class says, a removed environment keeps its nodes, advice that is the same for every object
is given once per diff. Objects that move to another namespace show as moves, not as a removal and an
addition; an environment that does not render is named first in every format."""

from __future__ import annotations

import copy
import json

from diff_objects import claim, cluster_config, environment, mpijob, storage_class

from eks_gpu_gitops.diff import impact
from eks_gpu_gitops.diff.formats import json_format, markdown, text
from eks_gpu_gitops.diff.model import ADDED, MOVED, REMOVED, BrokenEnvironment, Side
from eks_gpu_gitops.diff.report import build_report

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


# --- moves to another namespace -----------------------------------------------------------------------------


def in_namespace(doc: dict, namespace: str) -> dict:
    doc = copy.deepcopy(doc)
    if doc["kind"] == "Namespace":
        doc["metadata"]["name"] = namespace
    else:
        doc["metadata"]["namespace"] = namespace
    return doc


def renamed(objects: list[dict], namespace: str = "t2") -> list[dict]:
    """`objects` as an overlay's `namespace:` (or a Flux targetNamespace) makes them: the Namespace renamed,
    namespaced objects in it, cluster-scoped ones as they were."""
    return [
        in_namespace(d, namespace) if d["kind"] == "Namespace" or "namespace" in d["metadata"] else d for d in objects
    ]


def statuses(report) -> list[tuple[str, str, str]]:
    return [(c.status, c.key.kind, c.old_key.namespace) for env in report.environments for c in env.changes]


def test_a_renamed_namespace_moves_its_objects_and_still_says_what_the_old_namespace_takes_with_it():
    objects = [storage_class(), NAMESPACE, claim(), mpijob(2, 8)]
    report = build_report(SIDE, [environment(objects)], SIDE, [environment(renamed(objects))])

    [prod] = report.environments
    assert sorted(statuses(report)) == [
        (ADDED, "Namespace", ""),
        (MOVED, "MPIJob", "t"),
        (MOVED, "PersistentVolumeClaim", "t"),
        (REMOVED, "Namespace", ""),
    ]
    assert [prod.count(s) for s in (ADDED, MOVED, REMOVED)] == [1, 2, 1]
    moved = next(c for c in prod.changes if c.key.kind == "PersistentVolumeClaim")
    assert (moved.from_namespace, moved.key.namespace, moved.resource) == (
        "t",
        "t2",
        "PersistentVolumeClaim data: namespace t -> t2",
    )
    assert (moved.additions, moved.deletions) == (1, 1) and "-  namespace: t\n+  namespace: t2" in moved.diff

    # The old namespace and its claim are deleted, and both notices say the same about the volume.
    by_id = {n.id: n for _, n in report.notices}
    assert sorted(by_id) == ["claim-deleted", "job-stops", "namespace-deleted"]
    fate = "its FSx for Lustre file system and all data on it are deleted (reclaimPolicy Delete)"
    assert by_id["namespace-deleted"].resource == "Namespace t"
    assert f"PersistentVolumeClaim/data is deleted, and {fate}" in by_id["namespace-deleted"].message
    claim_notice = by_id["claim-deleted"]
    assert claim_notice.resource == "PersistentVolumeClaim t/data"
    assert claim_notice.message.startswith("Moves to namespace `t2`, where a new claim with a new, empty volume")
    assert f"the claim is deleted, and {fate}." in claim_notice.message
    assert by_id["job-stops"].resource == "MPIJob t/train"


def test_every_format_shows_a_move_with_both_namespaces():
    objects = [storage_class(), NAMESPACE, claim()]
    report = build_report(SIDE, [environment(objects)], SIDE, [environment(renamed(objects))])

    shown = text.render(report)
    assert "> PersistentVolumeClaim data: namespace t -> t2  (Kustomization training, +1 -1)" in shown
    assert "=== prod: +1 >1 -1" in shown
    document = json.loads(json_format.render(report))
    [env] = document["environments"]
    assert env["counts"] == {"added": 1, "changed": 0, "moved": 1, "removed": 1}
    [claim_entry] = [o for o in env["objects"] if o["kind"] == "PersistentVolumeClaim"]
    assert (claim_entry["status"], claim_entry["namespace"], claim_entry["namespace_move"]) == (
        "moved",
        "t2",
        {"from": "t", "to": "t2"},
    )
    assert all(o["namespace_move"] is None for o in env["objects"] if o["kind"] == "Namespace")
    comment = markdown.render(report)
    assert "&gt; <code>PersistentVolumeClaim data: namespace t -&gt; t2</code>" in comment
    assert "| +1 &gt;1 -1 |" in comment


def test_an_object_that_stays_in_its_namespace_and_appears_in_another_is_added():
    base = [NAMESPACE, claim()]
    head = [NAMESPACE, claim(), in_namespace(NAMESPACE, "t2"), in_namespace(claim(), "t2")]
    report = build_report(SIDE, [environment(base)], SIDE, [environment(head)])
    assert sorted(statuses(report)) == [(ADDED, "Namespace", ""), (ADDED, "PersistentVolumeClaim", "t2")]
    assert not report.notices


def test_ambiguous_and_cluster_scoped_objects_stay_removed_and_added():
    # Two claims named data in two namespaces, both moving: which went where is a guess, so no move.
    base = [in_namespace(claim(), "a"), in_namespace(claim(), "b")]
    head = [in_namespace(claim(), "c"), in_namespace(claim(), "d")]
    report = build_report(SIDE, [environment(base)], SIDE, [environment(head)])
    assert sorted(s for s, _, _ in statuses(report)) == [ADDED, ADDED, REMOVED, REMOVED]
    # An object that only gains a namespace (a cluster-scoped custom resource under targetNamespace).
    cluster_scoped = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}}
    report = build_report(
        SIDE, [environment([cluster_scoped])], SIDE, [environment([in_namespace(cluster_scoped, "t2")])]
    )
    assert sorted(s for s, _, _ in statuses(report)) == [ADDED, REMOVED]
    # Different environments never pair.
    report = build_report(
        SIDE,
        [environment([claim()], name="dev"), environment([], name="prod")],
        SIDE,
        [environment([], name="dev"), environment([in_namespace(claim(), "t2")], name="prod")],
    )
    assert sorted(s for s, _, _ in statuses(report)) == [ADDED, REMOVED]


def test_a_moved_object_its_owner_does_not_prune_stays_in_the_old_namespace():
    objects = [NAMESPACE, claim()]
    report = build_report(SIDE, [environment(objects, prune=False)], SIDE, [environment(renamed(objects), prune=False)])
    [(_, notice)] = report.notices
    assert (notice.id, notice.resource) == ("left-on-cluster", "Kustomization training")
    assert notice.message == (
        "2 removed objects stay on the cluster (1 of them moved to another namespace, where a new copy is "
        "created): Flux Kustomization `training` does not prune."
    )


# --- an environment that does not render --------------------------------------------------------------------

ERROR = "working tree does not render: overlays/dev: open a`b</details>.yaml: no such file (environment dev; ...)"


def with_broken(report):
    report.broken = [BrokenEnvironment("dev", ERROR)]
    return report


def test_a_broken_environment_comes_first_and_no_format_says_plain_no_changes():
    unchanged = with_broken(build_report(SIDE, [environment([claim()])], SIDE, [environment([claim()])]))
    shown = text.render(unchanged)
    assert "No changes in the rendered manifests." not in shown
    assert shown.index("ERROR dev: " + ERROR) < shown.index("No changes in the environments that render.")
    comment = markdown.render(unchanged)
    assert "No changes in the rendered manifests." not in comment
    section = comment.index("### 🛑 Not rendered")
    assert section < comment.index("No changes in the environments that render.")
    # Escaped: a code span longer than the backtick inside, so `</details>` is text.
    assert "- **dev**: ``working tree does not render: overlays/dev: open a`b</details>.yaml" in comment
    assert json.loads(json_format.render(unchanged))["broken"] == [{"name": "dev", "error": ERROR}]

    changed = with_broken(build_report(SIDE, [environment([claim()])], SIDE, [environment([claim("2400Gi")])]))
    comment = markdown.render(changed)
    assert "changes in **1 of 1** rendered environment." in comment
    assert comment.index("### 🛑 Not rendered") < comment.index("| Environment |")
    shown = text.render(changed)
    assert shown.index("ERROR dev: ") < shown.index("Impact")
    assert json.loads(json_format.render(build_report(SIDE, [], SIDE, [])))["broken"] == []
