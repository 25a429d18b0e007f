"""Kueue's manager as a local process on a ControlPlane, configured as its Helm chart configures it for the
environment's HelmRelease.

The chart (kubernetes-sigs/kueue v0.19.2, charts/kueue) runs the manager with the Configuration of its
values' managerConfig.controllerManagerConfigYaml, to which templates/manager/manager-config.yaml adds
internalCertManagement (on, with the <fullname>-webhook-service and <fullname>-webhook-server-cert names), and
registers its webhooks behind a Service. Here the same Configuration runs with what a local process needs
instead of a pod's: the webhook server, health probes and metrics on free loopback ports, leader election off,
and the webhook configurations calling https://127.0.0.1:<port>/<path> with the CA of a certificate made here
for 127.0.0.1.

Internal cert management stays on, as the chart has it: with it off, v0.19.2 reads the metrics certificate
from the fixed path /etc/kueue/metrics/certs (cmd/kueue/main.go), which a user's machine does not have. The
cert rotator (open-policy-agent/cert-controller v0.16.0, pkg/rotator) keeps the certificate it finds in the
<fullname>-webhook-server-cert Secret while that one is signed by the Secret's CA, valid for the Service's DNS
name and more than 90 days from expiry: the one made here is, and is also valid for 127.0.0.1. The rotator
does not write the files (a pod mounts the Secret): they are written here into the webhook's certDir.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from ..core.errors import InputError
from ..facts.schemas import KUEUE
from ..schemas.store import SchemaStore
from .cluster import wait_established
from .control_plane import ControlPlane, _free_port, find_binary

BINARY = "kueue"
READY_TIMEOUT = 90.0
GROUP = "kueue.x-k8s.io"

# The chart's CRDs (charts/kueue/templates/crd at v0.19.2) are config/components/crd/bases with a conversion
# webhook (path /convert) on these five; the cert rotator injects its CA into exactly these (pkg/util/cert).
_CRD_BASE = f"https://raw.githubusercontent.com/kubernetes-sigs/kueue/v{KUEUE}/config/components/crd/bases/{GROUP}"
CRD_FILES = (
    "admissionchecks",
    "clusterqueues",
    "cohorts",
    "localqueues",
    "multikueueclusters",
    "multikueueconfigs",
    "provisioningrequestconfigs",
    "resourceflavors",
    "topologies",
    "workloadpriorityclasses",
    "workloads",
)
CONVERTED = ("clusterqueues", "cohorts", "localqueues", "multikueueclusters", "workloads")

# managerConfig.controllerManagerConfigYaml in charts/kueue/values.yaml at v0.19.2, without its comments.
CHART_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 10
    LocalQueue.kueue.x-k8s.io: 5
    ClusterQueue.kueue.x-k8s.io: 5
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 300
  burst: 500
integrations:
  frameworks:
  - "batch/job"
  - "kubeflow.org/mpijob"
  - "ray.io/rayjob"
  - "ray.io/rayservice"
  - "ray.io/raycluster"
  - "jobset.x-k8s.io/jobset"
  - "workload.codeflare.dev/appwrapper"
  - "trainer.kubeflow.org/trainjob"
  - "pod"
  - "deployment"
  - "statefulset"
  - "leaderworkerset.x-k8s.io/leaderworkerset"
"""


@dataclass(frozen=True)
class Hook:
    """One webhook of the chart's (charts/kueue/templates/webhook/manifests.yaml at v0.19.2, the same as
    config/components/webhook/manifests.yaml), for the kinds a local control plane serves."""

    name: str
    path: str
    group: str
    version: str
    resources: tuple[str, ...]
    operations: tuple[str, ...]
    framework: str = ""  # a job kind's integration: only these have the managed-namespaces selector


_CU, _C = ("CREATE", "UPDATE"), ("CREATE",)
MUTATING = (
    Hook(
        "mclusterqueue.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue", GROUP, "v1beta2", ("clusterqueues",), _C
    ),
    Hook(
        "mresourceflavor.kb.io",
        "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
        GROUP,
        "v1beta2",
        ("resourceflavors",),
        _C,
    ),
    Hook("mworkload.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-workload", GROUP, "v1beta2", ("workloads",), _C),
    Hook(
        "mmpijob.kb.io",
        "/mutate-kubeflow-org-v2beta1-mpijob",
        "kubeflow.org",
        "v2beta1",
        ("mpijobs",),
        _C,
        "kubeflow.org/mpijob",
    ),
    Hook("mjob.kb.io", "/mutate-batch-v1-job", "batch", "v1", ("jobs",), _C, "batch/job"),
    Hook("mpod.kb.io", "/mutate--v1-pod", "", "v1", ("pods",), _C, "pod"),
    Hook("mdeployment.kb.io", "/mutate-apps-v1-deployment", "apps", "v1", ("deployments",), _CU, "deployment"),
    Hook("mstatefulset.kb.io", "/mutate-apps-v1-statefulset", "apps", "v1", ("statefulsets",), _CU, "statefulset"),
)
VALIDATING = (
    Hook(
        "vclusterqueue.kb.io",
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        GROUP,
        "v1beta2",
        ("clusterqueues",),
        _CU,
    ),
    Hook("vcohort.kb.io", "/validate-kueue-x-k8s-io-v1beta2-cohort", GROUP, "v1beta2", ("cohorts",), _CU),
    Hook(
        "vresourceflavor.kb.io",
        "/validate-kueue-x-k8s-io-v1beta2-resourceflavor",
        GROUP,
        "v1beta2",
        ("resourceflavors",),
        _CU,
    ),
    Hook(
        "vworkload.kb.io",
        "/validate-kueue-x-k8s-io-v1beta2-workload",
        GROUP,
        "v1beta2",
        ("workloads", "workloads/status"),
        _CU,
    ),
    Hook(
        "vmpijob.kb.io",
        "/validate-kubeflow-org-v2beta1-mpijob",
        "kubeflow.org",
        "v2beta1",
        ("mpijobs",),
        _CU,
        "kubeflow.org/mpijob",
    ),
    Hook("vjob.kb.io", "/validate-batch-v1-job", "batch", "v1", ("jobs",), _CU, "batch/job"),
    Hook("vpod.kb.io", "/validate--v1-pod", "", "v1", ("pods",), _CU, "pod"),
    Hook("vdeployment.kb.io", "/validate-apps-v1-deployment", "apps", "v1", ("deployments",), _CU, "deployment"),
    Hook("vstatefulset.kb.io", "/validate-apps-v1-statefulset", "apps", "v1", ("statefulsets",), _CU, "statefulset"),
)
# The chart makes these webhooks' failurePolicy Ignore when the framework is not among the integrations; the
# others are always Fail.
_OPTIONAL_FRAMEWORKS = ("pod", "deployment", "statefulset")


# --- the release ---------------------------------------------------------------------------------------------


@dataclass
class Release:
    """What the environment's Kueue HelmRelease gives the chart: its release name and namespace, and the values
    that change the manager (the Configuration and the feature gates)."""

    name: str = "kueue"
    namespace: str = "kueue-system"
    config_yaml: str = CHART_CONFIG
    feature_gates: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def fullname(self) -> str:
        """The chart's kueue.fullname (templates/_helpers.tpl) without overrides."""
        return self.name if "kueue" in self.name else f"{self.name}-kueue"


def _is_kueue_chart(release: dict, objects) -> bool:
    spec = release.get("spec") or {}
    chart = ((spec.get("chart") or {}).get("spec") or {}).get("chart")
    if chart is not None:
        return str(chart).rsplit("/", 1)[-1] == "kueue"
    reference = spec.get("chartRef") or {}
    for manifest in objects:
        if manifest.kind == reference.get("kind") and manifest.name == reference.get("name"):
            url = str((manifest.doc.get("spec") or {}).get("url", ""))
            return url.rstrip("/").rsplit("/", 1)[-1] == "kueue"
    return False


def release_of(objects) -> Release | None:
    """The environment's Kueue: its HelmRelease of the kueue chart, or the chart's defaults when the environment
    has a ClusterQueue but no such release (installed some other way); None when it has neither."""
    for manifest in objects:
        if manifest.kind == "HelmRelease" and _is_kueue_chart(manifest.doc, objects):
            return _release(manifest.doc)
    if any(m.group == GROUP and m.kind == "ClusterQueue" for m in objects):
        return Release(notes=["no HelmRelease of the kueue chart: Kueue runs with the chart's defaults"])
    return None


def _release(doc: dict) -> Release:
    metadata, spec = doc.get("metadata") or {}, doc.get("spec") or {}
    values = spec.get("values") or {}
    manager = values.get("managerConfig") or {}
    release = Release(
        name=str(spec.get("releaseName") or metadata.get("name") or "kueue"),
        namespace=str(spec.get("targetNamespace") or metadata.get("namespace") or "kueue-system"),
        config_yaml=str(manager.get("controllerManagerConfigYaml") or CHART_CONFIG),
        feature_gates=list((values.get("controllerManager") or {}).get("featureGates") or []),
    )
    if spec.get("valuesFrom"):
        release.notes.append("the Kueue HelmRelease's valuesFrom is not read: its inline values and the chart's are")
    return release


# --- files ---------------------------------------------------------------------------------------------------


def crd_docs() -> list[dict]:
    """Kueue's CRDs at the pinned release (downloaded once into the schema cache, or from GITOPS_SCHEMA_DIR)."""
    sources = {f"{GROUP}/{name}": f"{_CRD_BASE}_{name}.yaml" for name in CRD_FILES}
    store = SchemaStore(sources)
    docs = []
    for key in sources:
        document = store.document(key)
        for doc in document if isinstance(document, list) else [document]:
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(doc)
    return docs


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_certificates(folder: Path, dns_name: str) -> None:
    """ca.crt/ca.key and tls.crt/tls.key in `folder`: a CA the cert rotator accepts as its own (DNS name
    kueue-ca, pkg/util/cert caName) and a server certificate it signs for the webhook Service's DNS name and
    127.0.0.1, ten years long. Keys in PKCS#1: the rotator parses the CA key with x509.ParsePKCS1PrivateKey."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt, key, request, crt = (folder / n for n in ("ca.key", "ca.crt", "tls.key", "tls.csr", "tls.crt"))
    extensions = folder / "tls.ext"
    _openssl("genrsa", "-traditional", "-out", str(ca_key), "2048")
    _openssl(
        "req", "-x509", "-new", "-key", str(ca_key), "-out", str(ca_crt), "-days", "3650",
        "-subj", "/O=kueue/CN=kueue-ca", "-addext", "subjectAltName=DNS:kueue-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign",
    )  # fmt: skip
    _openssl("genrsa", "-traditional", "-out", str(key), "2048")
    _openssl("req", "-new", "-key", str(key), "-out", str(request), "-subj", f"/CN={dns_name}")
    extensions.write_text(
        f"subjectAltName=DNS:{dns_name},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE\n"
    )
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(crt), "-days", "3650", "-extfile", str(extensions),
    )  # fmt: skip


# --- the manager ---------------------------------------------------------------------------------------------


@dataclass
class Ports:
    webhook: int
    health: int
    metrics: int


class Kueue:
    """Start with `start()` on a running ControlPlane; the plane's `stop()` stops it too."""

    def __init__(self, plane: ControlPlane, release: Release, crds: list[dict]):
        self.plane = plane
        self.release = release
        self.crds = crds
        self.folder = plane.folder / "kueue"
        self.certs = self.folder / "certs"
        self.ports = Ports(_free_port(), _free_port(), _free_port())
        self.configuration: dict = {}
        self.api = None

    @property
    def log(self) -> Path:
        return self.plane.folder / f"{BINARY}.log"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.ports.webhook}"

    def start(self, timeout: float = READY_TIMEOUT) -> None:
        binary = find_binary(BINARY)
        self.configuration = self._configuration()
        service = self.configuration["internalCertManagement"]["webhookServiceName"]
        make_certificates(self.certs, f"{service}.{self.release.namespace}.svc")
        self.api = config.new_client_from_config(str(self.plane.kubeconfig))
        self._install_crds(timeout)
        self._create_namespace_and_secret()
        self._register_webhooks()
        config_file = self.folder / "controller_manager_config.yaml"
        config_file.write_text(yaml.safe_dump(self.configuration, sort_keys=False))
        argv = [binary, f"--config={config_file}", f"--kubeconfig={self.plane.kubeconfig}"]
        gates = self._feature_gates()
        if gates:
            argv.append(f"--feature-gates={gates}")
        self.plane._spawn(BINARY, argv)
        self.plane.components = (*self.plane.components, BINARY)
        self._wait_ready(timeout)

    def _configuration(self) -> dict:
        """The chart's ConfigMap for the release (manager-config.yaml), with a local process's addresses."""
        try:
            configuration = yaml.safe_load(self.release.config_yaml) or {}
        except yaml.YAMLError as error:
            raise InputError(f"Kueue HelmRelease: managerConfig.controllerManagerConfigYaml: {error}") from None
        if not isinstance(configuration, dict):
            raise InputError("Kueue HelmRelease: managerConfig.controllerManagerConfigYaml is not a mapping")
        fullname = self.release.fullname
        configuration.setdefault(
            "internalCertManagement",
            {
                "enable": True,
                "webhookServiceName": f"{fullname}-webhook-service",
                "webhookSecretName": f"{fullname}-webhook-server-cert",
            },
        )
        certs = configuration["internalCertManagement"]
        if certs.get("enable") is False:
            raise InputError(
                "Kueue HelmRelease: internalCertManagement off (cert-manager) is not simulated: Kueue v0.19.2 then "
                "reads its metrics certificate from /etc/kueue/metrics/certs"
            )
        certs.setdefault("webhookServiceName", f"{fullname}-webhook-service")
        certs.setdefault("webhookSecretName", f"{fullname}-webhook-server-cert")
        configuration["namespace"] = self.release.namespace
        configuration["health"] = {
            **(configuration.get("health") or {}),
            "healthProbeBindAddress": f"127.0.0.1:{self.ports.health}",
        }
        configuration["metrics"] = {
            **(configuration.get("metrics") or {}),
            "bindAddress": f"127.0.0.1:{self.ports.metrics}",
        }
        configuration["webhook"] = {"port": self.ports.webhook, "host": "127.0.0.1", "certDir": str(self.certs)}
        configuration["leaderElection"] = {**(configuration.get("leaderElection") or {}), "leaderElect": False}
        return configuration

    def _feature_gates(self) -> str:
        """The chart's kueue.featureGates (templates/_helpers.tpl): name=enabled, comma-separated."""
        gates = []
        for gate in self.release.feature_gates:
            if isinstance(gate, dict) and gate.get("name"):
                gates.append(f"{gate['name']}={str(bool(gate.get('enabled'))).lower()}")
        return ",".join(gates)

    def _ca_bundle(self) -> str:
        return base64.b64encode((self.certs / "ca.crt").read_bytes()).decode()

    def _install_crds(self, timeout: float) -> None:
        extensions = client.ApiextensionsV1Api(self.api)
        names = []
        for doc in self.crds:
            doc = json.loads(json.dumps(doc))
            doc.pop("status", None)
            plural = doc["spec"]["names"]["plural"]
            if plural in CONVERTED:
                doc["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {"url": f"{self.url}/convert", "caBundle": self._ca_bundle()},
                        "conversionReviewVersions": ["v1"],
                    },
                }
            extensions.create_custom_resource_definition(doc)
            names.append(doc["metadata"]["name"])
        wait_established(extensions, names, timeout)

    def _create_namespace_and_secret(self) -> None:
        core = client.CoreV1Api(self.api)
        try:
            core.create_namespace({"metadata": {"name": self.release.namespace}})
        except ApiException as error:
            if error.status != 409:
                raise
        data = {name: (self.certs / name).read_bytes() for name in ("ca.crt", "ca.key", "tls.crt", "tls.key")}
        core.create_namespaced_secret(
            self.release.namespace,
            {
                "metadata": {"name": self.configuration["internalCertManagement"]["webhookSecretName"]},
                "data": {name: base64.b64encode(value).decode() for name, value in data.items()},
            },
        )

    def _webhook(self, hook: Hook, mutating: bool) -> dict:
        frameworks = (self.configuration.get("integrations") or {}).get("frameworks") or []
        optional_off = hook.framework in _OPTIONAL_FRAMEWORKS and hook.framework not in frameworks
        webhook = {
            "name": hook.name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": f"{self.url}{hook.path}", "caBundle": self._ca_bundle()},
            "failurePolicy": "Ignore" if optional_off else "Fail",
            "sideEffects": "None",
            "rules": [
                {
                    "apiGroups": [hook.group],
                    "apiVersions": [hook.version],
                    "operations": list(hook.operations),
                    "resources": list(hook.resources),
                }
            ],
        }
        if hook.framework:
            webhook["namespaceSelector"] = self.configuration.get("managedJobsNamespaceSelector") or {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": ["kube-system", self.release.namespace],
                    }
                ]
            }
        if mutating:
            webhook["reinvocationPolicy"] = "Never"  # the chart's mutatingWebhook.reinvocationPolicy default
        return webhook

    def _register_webhooks(self) -> None:
        registration = client.AdmissionregistrationV1Api(self.api)
        fullname = self.release.fullname
        registration.create_mutating_webhook_configuration(
            {
                "metadata": {"name": f"{fullname}-mutating-webhook-configuration"},
                "webhooks": [self._webhook(hook, mutating=True) for hook in MUTATING],
            }
        )
        registration.create_validating_webhook_configuration(
            {
                "metadata": {"name": f"{fullname}-validating-webhook-configuration"},
                "webhooks": [self._webhook(hook, mutating=False) for hook in VALIDATING],
            }
        )

    def _wait_ready(self, timeout: float) -> None:
        """Ready when its readyz says so (the webhook server started, its certificates in place) and the API
        server gets an answer from its webhooks: a dry-run ResourceFlavor goes through both of Kueue's."""
        deadline = time.monotonic() + timeout
        readyz = f"http://127.0.0.1:{self.ports.health}/readyz"
        waiting_for = "its readyz endpoint"
        while time.monotonic() < deadline:
            if self.plane.processes[BINARY].poll() is not None:
                raise InputError(f"Kueue exited at start (its log: {self.log}): {self.plane.log_tail(BINARY)}")
            try:
                if waiting_for == "its readyz endpoint":
                    with urllib.request.urlopen(readyz, timeout=2) as response:
                        if response.status == 200:
                            waiting_for = "its webhooks, called by the API server"
                if waiting_for != "its readyz endpoint" and self._webhooks_answer():
                    return
            except (OSError, ssl.SSLError):
                pass
            time.sleep(0.3)
        raise InputError(
            f"Kueue not ready after {timeout:.0f} s, waiting for {waiting_for} (its log: {self.log}): "
            f"{self.plane.log_tail(BINARY)}"
        )

    def _webhooks_answer(self) -> bool:
        body = {
            "apiVersion": f"{GROUP}/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "simulate-readiness-probe"},
        }
        try:
            client.CustomObjectsApi(self.api).create_cluster_custom_object(
                GROUP, "v1beta2", "resourceflavors", body, dry_run="All"
            )
        except ApiException as error:
            if error.status >= 500:  # "failed calling webhook ...": not serving yet
                return False
            raise
        return True
