"""crd-rule-violated: the x-kubernetes-validations (CEL) rules of real CRDs ($GITOPS_SCHEMA_DIR/crds: Kueue,
Flux, Karpenter) on objects that break them and objects that keep them, as the schema stage reports them; the
API server's own answer to the same objects (a live kube-apiserver with those CRDs); and no value of an object
in any output, whatever its rule's message says."""

from __future__ import annotations

import copy
import json
import subprocess
from functools import cache

import pytest
import yaml
from conftest import SCHEMA_DIR, TOOL

from eks_gpu_gitops.model import Manifest, Scope
from eks_gpu_gitops.schemas.checker import SchemaChecker, SchemaStore
from eks_gpu_gitops.validate.cel import CelBatch
from eks_gpu_gitops.validate.schemas import check_schemas

RULE = "crd-rule-violated"


@cache
def _crd_files() -> dict[str, str]:
    """group/Kind -> the name of its CRD file in the schema folder."""
    assert SCHEMA_DIR is not None, "these tests read the real CRDs of GITOPS_SCHEMA_DIR (make test sets it)"
    found = {}
    for path in sorted((SCHEMA_DIR / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        found[f"{crd['spec']['group']}/{crd['spec']['names']['kind']}"] = path.name
    return found


@cache
def _checker() -> SchemaChecker:
    """Every CRD of the schema folder pinned, as platform.yaml pins the template's (a URL whose file name is
    the one in the folder)."""
    sources = {key: f"https://example.invalid/crds/{name}" for key, name in _crd_files().items()}
    return SchemaChecker(SchemaStore(sources, schema_dir=SCHEMA_DIR))


def check(*docs: dict, checker: SchemaChecker | None = None):
    """(findings of every rule, notes) of the schema stage over one scope of `docs`."""
    objects = [Manifest(copy.deepcopy(doc), "apps.yaml", env="dev") for doc in docs]
    scope = Scope("dev", objects, kubernetes_version="1.33")
    found, notes = check_schemas([scope], checker or _checker(), lambda line: None)
    return found.get(0, []), notes.get(0, [])


def violations(*docs: dict, checker: SchemaChecker | None = None) -> list[tuple[str, tuple, str]]:
    findings, _ = check(*docs, checker=checker)
    others = [(f.rule, f.message) for f in findings if f.rule != RULE]
    assert not others, f"the case is not schema-valid: {others}"
    return sorted((f.manifest.resource, f.path, f.message) for f in findings if f.rule == RULE)


# --- objects of the real CRDs -----------------------------------------------------------------------------------


def cluster_queue(**spec) -> dict:
    resources = spec.pop("resources", [{"name": "cpu", "nominalQuota": 8}])
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "gpu"},
        "spec": {
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": resources}]}],
            **spec,
        },
    }


def resource_flavor(**spec) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "p5"}, "spec": spec}


def topology(*labels: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": label} for label in labels]},
    }


def cohort(covered: list[str], flavor_resources: list[str]) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Cohort",
        "metadata": {"name": "research"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": covered,
                    "flavors": [
                        {"name": "default", "resources": [{"name": r, "nominalQuota": 1} for r in flavor_resources]}
                    ],
                }
            ]
        },
    }


def local_queue(cluster_queue_name: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": "training", "namespace": "training"},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def node_pool(*requirement_keys: str, labels: dict | None = None) -> dict:
    template: dict = {
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
            "requirements": [{"key": key, "operator": "Exists"} for key in requirement_keys],
        }
    }
    if labels is not None:
        template["metadata"] = {"labels": labels}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {"template": template},
    }


def helm_release(**spec) -> dict:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "kueue", "namespace": "flux-system"},
        "spec": {"interval": "10m", **spec},
    }


CHART = {"spec": {"chart": "kueue", "sourceRef": {"kind": "HelmRepository", "name": "kueue"}}}
CHART_REF = {"kind": "OCIRepository", "name": "kueue"}


def kustomization(**spec) -> dict:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"},
        "spec": {
            "interval": "10m",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            **spec,
        },
    }


CQ = "ClusterQueue/gpu"
RF = "ResourceFlavor/p5"
# Each case: (id, objects, [(object, field path, message)]) with the message as validate prints it.
CASES = [
    (
        "clusterqueue-borrowing-limit-without-cohort",
        [cluster_queue(resources=[{"name": "cpu", "nominalQuota": 8, "borrowingLimit": 2}])],
        [(CQ, ("spec",), "spec: Invalid value: borrowingLimit must be nil when cohort is empty")],
    ),
    (
        "clusterqueue-borrowing-limit-with-cohort",
        [cluster_queue(cohort="research", resources=[{"name": "cpu", "nominalQuota": 8, "borrowingLimit": 2}])],
        [],
    ),
    (
        "clusterqueue-flavor-resources-not-covered",
        [cluster_queue(resources=[{"name": "cpu", "nominalQuota": 8}, {"name": "memory", "nominalQuota": "1Gi"}])],
        [
            (
                CQ,
                ("spec", "resourceGroups", 0),
                "spec.resourceGroups[0]: Invalid value: flavors must have the same number of resources as the "
                "coveredResources",
            )
        ],
    ),
    ("clusterqueue-plain", [cluster_queue()], []),
    # reclaimWithinCohort is not written: the API server defaults it to Never before the rule runs.
    (
        "clusterqueue-preemption-defaulted-then-checked",
        [cluster_queue(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}})],
        [
            (
                CQ,
                ("spec", "preemption"),
                "spec.preemption: Invalid value: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
            )
        ],
    ),
    (
        "clusterqueue-preemption-reclaiming",
        [cluster_queue(preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}})],
        [],
    ),
    (
        "resourceflavor-topology-with-empty-node-labels",
        [resource_flavor(topologyName="default", nodeLabels={})],
        [(RF, ("spec",), "spec: Invalid value: at least one nodeLabel is required when topology is set")],
    ),
    # The rule reads a field that is absent: an evaluation error, which the API server reports (and refuses) too.
    (
        "resourceflavor-topology-without-node-labels",
        [resource_flavor(topologyName="default")],
        [
            (
                RF,
                ("spec",),
                "spec: Invalid value: no such key: nodeLabels evaluating rule: at least one nodeLabel is required "
                "when topology is set",
            )
        ],
    ),
    # The other rules of this schema read oldSelf (immutability): skipped on create, as the API server does.
    (
        "resourceflavor-topology-with-node-labels",
        [resource_flavor(topologyName="default", nodeLabels={"node.kubernetes.io/instance-type": "p5.48xlarge"})],
        [],
    ),
    (
        "resourceflavor-toleration-exists-with-value",
        [resource_flavor(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "value": "true"}])],
        [
            (
                RF,
                ("spec", "tolerations"),
                "spec.tolerations: Invalid value: a value must be empty when 'operator' is 'Exists'",
            )
        ],
    ),
    (
        "resourceflavor-toleration-exists",
        [resource_flavor(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])],
        [],
    ),
    (
        "topology-hostname-not-lowest",
        [topology("kubernetes.io/hostname", "topology.k8s.aws/network-node-layer-1")],
        [
            (
                "Topology/default",
                ("spec", "levels"),
                "spec.levels: Invalid value: the kubernetes.io/hostname label can only be used at the lowest level of "
                "topology",
            )
        ],
    ),
    (
        "topology-repeated-level",
        [topology("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-1")],
        [("Topology/default", ("spec", "levels"), "spec.levels: Invalid value: must be unique")],
    ),
    ("topology-hostname-lowest", [topology("topology.k8s.aws/network-node-layer-1", "kubernetes.io/hostname")], []),
    (
        "cohort-flavor-resources-not-covered",
        [cohort(["cpu"], ["cpu", "memory"])],
        [
            (
                "Cohort/research",
                ("spec", "resourceGroups", 0),
                "spec.resourceGroups[0]: Invalid value: flavors must have the same number of resources as the "
                "coveredResources",
            )
        ],
    ),
    ("cohort-covered", [cohort(["cpu", "memory"], ["cpu", "memory"])], []),
    # Its only rule is a transition rule (the queue is immutable): nothing to evaluate on create.
    ("localqueue-transition-rule-only", [local_queue("gpu")], []),
    (
        "nodepool-restricted-requirement",
        [node_pool("karpenter.sh/nodepool")],
        [
            (
                "NodePool/gpu",
                ("spec", "template", "spec", "requirements", 0, "key"),
                'spec.template.spec.requirements[0].key: Invalid value: label "karpenter.sh/nodepool" is restricted',
            )
        ],
    ),
    (
        "nodepool-restricted-label-domain",
        [node_pool("karpenter.sh/capacity-type", labels={"karpenter.sh/team": "ml"})],
        [
            (
                "NodePool/gpu",
                ("spec", "template", "metadata", "labels"),
                'spec.template.metadata.labels: Invalid value: label domain "karpenter.sh" is restricted',
            )
        ],
    ),
    (
        "nodepool-allowed",
        [node_pool("karpenter.sh/capacity-type", "karpenter.k8s.aws/instance-family", labels={"team": "ml"})],
        [],
    ),
    (
        "helmrelease-chart-and-chart-ref",
        [helm_release(chart=CHART, chartRef=CHART_REF)],
        [("HelmRelease/flux-system/kueue", ("spec",), "spec: Invalid value: either chart or chartRef must be set")],
    ),
    ("helmrelease-chart-ref", [helm_release(chartRef=CHART_REF)], []),
    (
        "helmrelease-retry-interval-with-remediate",
        [helm_release(chartRef=CHART_REF, upgrade={"strategy": {"name": "RemediateOnFailure", "retryInterval": "5m"}})],
        [
            (
                "HelmRelease/flux-system/kueue",
                ("spec", "upgrade", "strategy"),
                "spec.upgrade.strategy: Invalid value: .retryInterval can only be set when .name is 'RetryOnFailure'",
            )
        ],
    ),
    (
        "kustomization-kubeconfig-both-refs",
        [kustomization(kubeConfig={"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}})],
        [
            (
                "Kustomization/flux-system/apps",
                ("spec", "kubeConfig"),
                "spec.kubeConfig: Invalid value: exactly one of spec.kubeConfig.configMapRef or "
                "spec.kubeConfig.secretRef must be specified",
            )
        ],
    ),
    ("kustomization-kubeconfig-secret", [kustomization(kubeConfig={"secretRef": {"name": "b"}})], []),
]


@pytest.mark.parametrize("objects, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_real_crd_rules(objects, expected):
    assert violations(*objects) == sorted(expected)


def test_each_object_is_reported_once_in_each_environment():
    bad = cluster_queue(resources=[{"name": "cpu", "nominalQuota": 8, "borrowingLimit": 2}])
    scopes = [
        Scope(env, [Manifest(copy.deepcopy(bad), "q.yaml", env=env)], kubernetes_version="1.33")
        for env in ("dev", "prod")
    ]
    found, _ = check_schemas(scopes, _checker(), lambda line: None)
    assert [[f.manifest.env for f in found[i] if f.rule == RULE] for i in (0, 1)] == [["dev"], ["prod"]]


def test_premise_absent_nothing_is_sent():
    """Kinds whose CRD carries no CEL rule (MPIJob), built-in kinds and kinds without a CRD are not evaluated."""
    mpijob = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "j"},
        "spec": {"mpiReplicaSpecs": {}},
    }
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    checker = _checker()
    batch = CelBatch()
    for doc in (mpijob, config_map):
        manifest = Manifest(doc, "a.yaml")
        crd = checker.crd_for(manifest)
        assert crd is None or not batch.add(0, manifest, *crd)
    assert batch.checks == []
    assert violations(mpijob, config_map) == []


def test_an_object_with_blocking_schema_errors_is_not_evaluated():
    """The API server stops before the CEL rules on a wrong type (hasBlockingErr); schema-invalid says why."""
    bad = cluster_queue(resources=[{"name": "cpu", "nominalQuota": 8, "borrowingLimit": 2}])
    bad["spec"]["queueingStrategy"] = "Sometimes"  # not in the enum
    findings, notes = check(bad)
    assert [f.rule for f in findings] == ["schema-invalid"]
    assert [note for note in notes if "CEL" in note] == [
        "ClusterQueue/gpu: CEL rules of its CRD not evaluated: the object has schema errors that stop the API "
        "server before its CEL rules"
    ]


# --- rendered CRDs, messageExpression, cost ---------------------------------------------------------------------


def widget_crd(rule: dict, item_schema: dict | None = None) -> dict:
    """A CRD rendered with the manifests (not pinned): example.com/Widget, one rule on spec.comment."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "comment": {"type": "string", "x-kubernetes-validations": [rule]},
                                        "items": item_schema or {"type": "array", "items": {"type": "string"}},
                                    },
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


SECRET = "hunter2-Qz7vXw9Lp"  # a value no credential pattern of mask_text knows


def widget(comment: str, items: list | None = None) -> dict:
    spec = {"comment": comment, **({"items": items} if items is not None else {})}
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "a"}, "spec": spec}


ECHOING_RULE = {"rule": "!self.startsWith('hunter2')", "messageExpression": "'comment ' + self + ' is a password'"}


def test_a_message_expression_is_never_shown():
    """Its result can quote any value, whole or transformed (a number, a short string, an upper-cased token)."""
    transforming = {
        "rule": "!self.startsWith('hunter2')",
        "messageExpression": "'comment ' + self + ' ' + string(size(self)) + ' ' + self.upperAscii()",
    }
    for rule in (ECHOING_RULE, transforming):
        found = violations(widget_crd(rule), widget(SECRET))
        assert found == [
            (
                "Widget/a/w",
                ("spec", "comment"),
                "spec.comment: Invalid value: the rule's messageExpression message is not shown (it may quote the "
                "object's values)",
            )
        ]


def test_rule_without_message_names_the_rule():
    found = violations(widget_crd({"rule": "self.size() < 8"}), widget(SECRET))
    assert found == [("Widget/a/w", ("spec", "comment"), "spec.comment: Invalid value: failed rule: self.size() < 8")]


def test_a_field_left_with_a_variable_is_not_judged():
    """${COMMENT_FROM_CLUSTER} is what Flux substitutes on the cluster: whether the rule holds is not known here."""
    findings, notes = check(widget_crd({"rule": "self.size() < 8"}), widget("${COMMENT_FROM_CLUSTER}"))
    assert [f for f in findings if f.rule == RULE] == []
    assert [n for n in notes if "CEL" in n] == [
        "Widget/a/w: a CEL rule of its CRD at spec.comment not judged: the field holds ${...} values only known "
        "once they are substituted"
    ]


def test_rule_reason_is_the_api_servers_wording():
    rule = {"rule": "self == ''", "message": "comment must not be set here", "reason": "FieldValueForbidden"}
    assert violations(widget_crd(rule), widget(SECRET)) == [
        ("Widget/a/w", ("spec", "comment"), "spec.comment: Forbidden: comment must not be set here")
    ]


def test_a_pinned_crd_wins_over_a_rendered_one():
    """The rendered copy of a pinned kind is not the schema the stage uses (schema-invalid's rule)."""
    rendered = yaml.safe_load((SCHEMA_DIR / "crds" / "kueue.x-k8s.io_resourceflavors.yaml").read_text())
    for version in rendered["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["spec"].pop("x-kubernetes-validations", None)
    found = violations(rendered, resource_flavor(topologyName="default", nodeLabels={}))
    assert found == [(RF, ("spec",), "spec: Invalid value: at least one nodeLabel is required when topology is set")]


def test_running_out_of_the_cost_budget_is_a_finding_not_a_crash():
    """A rule whose cost passes the API server's per-expression limit (1,000,000): the API server rejects the
    object, and so does validate."""
    costly = {"rule": "self.all(x, self.all(y, self.all(z, x + y + z != '')))", "message": "never"}
    crd = widget_crd(
        {"rule": "true"}, {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": [costly]}
    )
    found = violations(crd, widget("t", [f"item-{i}" for i in range(200)]))
    assert len(found) == 1
    resource, path, message = found[0]
    assert (resource, path) == ("Widget/a/w", ("spec", "items"))
    assert message.startswith("spec.items: the CRD's CEL rules exceed the API server's cost budget: ")
    assert "item-" not in message


def test_a_number_json_cannot_carry_skips_that_object_only():
    """YAML's .nan is a float JSON has no form for: the object is not sent (a note), the rest of the run is."""
    odd = widget("fine")
    odd["spec"]["weight"] = float("nan")
    findings, notes = check(widget_crd({"rule": "self.size() < 8"}), odd, {**widget(SECRET), "metadata": {"name": "v"}})
    assert [(f.manifest.resource, f.path) for f in findings if f.rule == RULE] == [("Widget/v", ("spec", "comment"))]
    assert [n for n in notes if "CEL" in n] == [
        "Widget/a/w: CEL rules of its CRD not evaluated: it (or its CRD) holds a number JSON cannot carry (.nan or "
        ".inf)"
    ]


def test_a_helper_that_fails_is_a_note():
    def broken(crds, checks):
        from eks_gpu_gitops.core.errors import InputError

        raise InputError("eks-gpu-gitops-helper stopped answering (exit status -9)")

    batch = CelBatch()
    crd = yaml.safe_load((SCHEMA_DIR / "crds" / "kueue.x-k8s.io_resourceflavors.yaml").read_text())
    assert batch.add(3, Manifest(resource_flavor(topologyName="x"), "a.yaml"), crd, "rf")
    found, notes = batch.run(broken)
    assert found == {}
    assert notes == {3: ["CEL rules of the CRDs not checked: eks-gpu-gitops-helper stopped answering (exit status -9)"]}


# --- no value in any output -------------------------------------------------------------------------------------


@pytest.mark.parametrize("output", ["text", "json", "github"])
def test_no_value_of_a_violating_field_in_any_output(tmp_path, output):
    """Folder mode: a rendered CRD whose messageExpression repeats the field's value, and Karpenter's NodePool
    (its CRD rendered alongside) whose rejected requirement key holds the value: the findings are there, the
    value is in no line validate prints."""
    folder = tmp_path / "apps"
    folder.mkdir()
    nodepools = (SCHEMA_DIR / "crds" / "karpenter.sh_nodepools.yaml").read_text()
    (folder / "crds.yaml").write_text(nodepools + "\n---\n" + yaml.safe_dump(widget_crd(ECHOING_RULE)))
    objects = [widget(SECRET), node_pool(f"karpenter.sh/{SECRET}")]
    (folder / "objects.yaml").write_text(yaml.safe_dump_all(objects))
    result = subprocess.run(
        [str(TOOL), "validate", str(folder), "--format", output, "--offline"], capture_output=True, text=True
    )
    assert result.returncode == 1, result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    if output == "json":
        fired = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == RULE]
        assert sorted((f["resource"], f["path"]) for f in fired) == [
            ("NodePool/gpu", "spec.template.spec.requirements.0.key"),
            ("Widget/a/w", "spec.comment"),
        ]
    else:
        assert RULE in result.stdout


# --- the API server's own answer --------------------------------------------------------------------------------


def _server_causes(api, doc: dict) -> list[tuple[str, str]] | None:
    """(field, message) of each cause the API server gives for refusing a dry-run create; None when it accepts."""
    from kubernetes.client.rest import ApiException
    from kubernetes.dynamic import DynamicClient

    resource = DynamicClient(api).resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    doc = copy.deepcopy(doc)
    namespace = None
    if resource.namespaced:  # the shared control plane's own namespace: no test creates the cases' namespaces
        namespace = doc["metadata"]["namespace"] = "default"
    try:
        resource.create(body=doc, namespace=namespace, query_params=[("dryRun", "All")])
    except ApiException as error:
        body = json.loads(error.body)
        return sorted((c.get("field", ""), c.get("message", "")) for c in (body.get("details") or {}).get("causes", []))
    return None


def test_the_api_server_answers_the_same(control_plane):
    """Every case against kube-apiserver (the control plane of the live tests, the CRDs of GITOPS_SCHEMA_DIR
    installed): it refuses exactly the objects validate reports, on the same fields, with the same messages
    (the value it prints is the part validate leaves out)."""
    from eks_gpu_gitops.live.cluster import connect

    api = connect(kubeconfig=str(control_plane.kubeconfig)).api
    for case_id, objects, expected in CASES:
        for doc in objects:
            resource = Manifest(doc, "").resource
            ours = [(path, message) for who, path, message in expected if who == resource]
            causes = _server_causes(api, doc)
            if not ours:
                assert causes is None, (case_id, causes)
                continue
            assert causes is not None, case_id
            assert len(causes) == len(ours), (case_id, causes)
            for (field, server_message), (_, message) in zip(causes, sorted(ours), strict=True):
                where, reason, detail = message.split(": ", 2)
                assert field == where, (case_id, causes)
                assert server_message.startswith(reason + ": ") and server_message.endswith(detail), (case_id, causes)
