"""Hygiene and security rules: pinned images, no committed credentials, the right workload kind."""

from __future__ import annotations

import json
import re

from ..facts import limits
from ..model import GPU, Scope, mapping, sequence
from ..model.fields import strings
from ..model.mpi import runs_mpi
from ..model.placeholders import PLACEHOLDER, holds_placeholder
from ..model.secrets import TEXT, WHOLE, mask_text, secret_paths, secret_spans
from .registry import REGISTRY, SUPPRESSION_PREFIX, Finding, category

rule = category("Hygiene and security")

# TOKEN only as a whole word: TOKENIZERS_PARALLELISM and MAX_TOKENS are settings, HF_TOKEN is not.
_SECRET_NAME = re.compile(
    r"PASSWORD|PASSWD|SECRET|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|(^|_)TOKEN(_|$)", re.IGNORECASE
)
_SWITCH_VALUE = re.compile(r"^(true|false|yes|no|on|off|enabled?|disabled?)$", re.IGNORECASE)
_NOT_A_SECRET = re.compile(r"_(FILE|PATH|DIR|NAME|ARN|URL|REF)$", re.IGNORECASE)
_AWS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")


def image_tag(image: str) -> str | None:
    """The tag of an image reference ("" when untagged), or None when pinned by digest."""
    if "@" in image:
        return None
    name = image.rsplit("/", 1)[-1]
    return name.rpartition(":")[2] if ":" in name else ""


@rule(
    "image-tag-latest",
    "warning",
    premise="A container or init container of a pod template has an image with no tag, or the tag latest, and no "
    "digest.",
    consequence="risk",
    description="A workload's image is untagged or tagged latest",
    remediation="Pin the image to a version tag or a digest (in kustomize: images[].newTag or digest).",
    docs="""A moving tag makes the same commit run different code on each pull: workers of one MPI world can
      even run different builds, and a rollback does not roll back. The image still runs, so it is a warning;
      a repository made by the template raises it to an error for its production environments in its
      validate configuration.""",
)
def image_tag_latest(scope: Scope):
    for template in scope.pod_templates:
        for container in template.containers + template.init_containers:
            image = str(container.spec.get("image", ""))
            tag = image_tag(image)
            if image and tag in ("", "latest"):
                what = "untagged (so latest)" if tag == "" else "tagged latest"
                yield Finding(
                    template.owner,
                    f"{template.container_label(container)} image {image} is {what}",
                    (*container.path, "image"),
                )


@rule(
    "image-reference-invalid",
    "error",
    premise="A container or init container of a pod template has an image written without Flux variables or "
    "placeholders (placeholder-value reports those).",
    consequence="job",
    description="A container's image is not a reference the kubelet can parse",
    remediation="Write the image as [registry[:port]/]repository[:tag][@sha256:digest] with a lowercase repository "
    "and no spaces, e.g. ghcr.io/org/trainer:0.1.0 (in kustomize: images[].newName and newTag).",
    docs="""The kubelet parses every container's image with distribution/reference's ParseNormalizedNamed before
      it pulls (k8s.io/kubernetes v1.34.4, pkg/util/parsers/parsers.go and pkg/kubelet/images/image_manager.go):
      an image that does not parse leaves the container waiting in InvalidImageName and the pod never starts,
      while the API server takes it (a Pod only has to be free of leading and trailing spaces, an MPIJob's
      templates are not checked at all). The grammar is distribution/reference v0.6.0's (facts/limits.py):
      a lowercase repository path, a tag of at most 128 characters, a sha256, sha384 or sha512 digest.
      Images with Flux variables (${...}) are left to the substitution rules, and images that hold a
      placeholder (`<account>.dkr.ecr...`, `<DOCKER_REGISTRY>`) to placeholder-value: a template someone must
      still fill in is not yet wrong.""",
)
def image_reference_invalid(scope: Scope):
    for template in scope.pod_templates:
        for container in template.containers + template.init_containers:
            image = container.spec.get("image")
            if not isinstance(image, str) or "${" in image or holds_placeholder(image):
                continue
            problem = limits.parse_image(image)[1]
            if problem:
                yield Finding(
                    template.owner,
                    f"{template.container_label(container)} image {image!r} does not parse: {problem}",
                    (*container.path, "image"),
                )


@rule(
    "env-literal-credential",
    "warning",
    premise="A container's env entry has a literal value, and its name looks like a credential or its value like an "
    "AWS access key id.",
    consequence="risk",
    description="A container's env holds a literal credential",
    remediation="Read the value from a Secret (env[].valueFrom.secretKeyRef) created outside Git or encrypted "
    "with SOPS, or use IAM roles (EKS Pod Identity) instead of keys.",
    docs="""Everything in the repository is readable by everyone with access to it and stays in its history.
      The rule flags env entries whose name looks like a credential (password, secret, token, api key, access
      key) with a literal value, and any value that looks like an AWS access key id. The workload runs, so it is
      a warning; a repository that keeps credentials out of Git raises it to an error in its validate
      configuration (the template's does).""",
)
def env_literal_credential(scope: Scope):
    for template in scope.pod_templates:
        for container in template.containers + template.init_containers:
            for index, entry in enumerate(sequence(container.spec, "env")):
                if not isinstance(entry, dict) or "value" not in entry:
                    continue
                name, value = str(entry.get("name", "")), str(entry.get("value") or "")
                named = _SECRET_NAME.search(name) and not _NOT_A_SECRET.search(name) and not _SWITCH_VALUE.match(value)
                if value and not value.startswith("$(") and (named or _AWS_KEY_ID.search(value)):
                    yield Finding(
                        template.owner,
                        f"{template.container_label(container)} sets {name} to a literal value",
                        (*container.path, "env", index, "value"),
                    )


@rule(
    "secret-data-committed",
    "warning",
    premise="A Secret among the inputs has data or stringData and no SOPS metadata.",
    consequence="risk",
    description="A Secret with data is committed in plain text",
    remediation="Keep the Secret out of Git (create it with the cluster's secret store) or encrypt it with SOPS "
    "and Flux's decryption.",
    docs="""Secret data is only base64-encoded, not encrypted: everyone who can read the repository reads it, and
      its history keeps it. A SOPS-encrypted Secret (one with a `sops` section) is accepted. The Secret works, so
      it is a warning; a repository that keeps credentials out of Git raises it to an error in its validate
      configuration (the template's does).""",
)
def secret_data_committed(scope: Scope):
    for manifest in scope.of("Secret", ""):
        if "sops" in manifest.doc:
            continue
        for section in ("data", "stringData"):
            if mapping(manifest.doc, section):
                yield Finding(
                    manifest,
                    f"Secret {manifest.name} has {section} keys {', '.join(sorted(mapping(manifest.doc, section)))}",
                    (section,),
                )


@rule(
    "job-mpirun-not-mpijob",
    "warning",
    premise="A batch Job or CronJob with parallelism above 1 runs mpirun or horovodrun in its containers.",
    consequence="cost",
    description="A batch Job with parallelism above 1 runs mpirun or horovodrun",
    remediation="Run distributed training as an MPIJob (kubeflow.org/v2beta1): one launcher runs mpirun, "
    "workers run sshd.",
    docs="""The pods of a parallel Job are independent: each one starts its own mpirun with its own world, so
      N pods train N separate models (each on the whole data set) instead of one model on N workers. The MPI
      operator builds the hostfile and SSH keys that join the pods into one world. Each pod's run can still
      finish, at N times the GPU-hours, so it is a warning.""",
)
def job_mpirun_not_mpijob(scope: Scope):
    for template in scope.pod_templates:
        if (
            template.owner.kind in ("Job", "CronJob")
            and (template.replicas or 0) > 1
            and any(runs_mpi(c) for c in template.containers)
        ):
            path = (
                ("spec", "parallelism")
                if template.owner.kind == "Job"
                else ("spec", "jobTemplate", "spec", "parallelism")
            )
            yield Finding(
                template.owner,
                f"{template.owner.kind} {template.owner.name} runs mpirun in {template.replicas} independent pods",
                path,
            )


@rule(
    "hpa-on-gpu",
    "warning",
    premise="A HorizontalPodAutoscaler has a Resource or ContainerResource metric named nvidia.com/gpu.",
    consequence="risk",
    description="A HorizontalPodAutoscaler scales on nvidia.com/gpu, which is not a resource metric",
    remediation="Scale on a GPU utilisation metric from an exporter (DCGM) through the custom or external "
    "metrics API, or drop the HPA for training jobs.",
    docs="""Resource metrics come from the metrics server, which only knows cpu and memory; an HPA on
      nvidia.com/gpu never gets a value and never scales (it reports FailedGetResourceMetric). The API server
      takes any resource name there (kubernetes pkg/apis/autoscaling/validation validateResourceSource) and the
      workload runs at its current replicas, so it is a warning.""",
)
def hpa_on_gpu(scope: Scope):
    for manifest in scope.of("HorizontalPodAutoscaler"):
        for index, metric in enumerate(sequence(manifest.doc, "spec", "metrics")):
            kind = str(metric.get("type", "")) if isinstance(metric, dict) else ""
            section = {"Resource": "resource", "ContainerResource": "containerResource"}.get(kind)
            if section and mapping(metric, section).get("name") == GPU:
                yield Finding(manifest, f"metric {index} is a {kind} metric on {GPU}", ("spec", "metrics", index))


@rule(
    "placeholder-value",
    "warning",
    premise="A string value of an object or of the ClusterConfig is, or holds as a whole token, a placeholder.",
    consequence="risk",
    description="A value is still a placeholder (REPLACE-ME, CHANGEME, <account-id>, xxxx, TODO)",
    remediation="Replace the placeholder with the real value; a per-cluster value (such as the FSx subnet and "
    "security group) belongs in the cluster-settings ConfigMap that Flux substitutes (scripts/cluster-settings).",
    docs="""`subnet-REPLACE-ME` and the like are valid YAML and pass the schemas, but FSx cannot create a file
      system with them and the claim stays Pending. The template writes none (per-cluster values come from
      the cluster-settings ConfigMap as `${FSX_SUBNET_ID}` and the like), so one here was written by hand.
      Recognised as whole tokens only: REPLACE-ME and CHANGE-ME (any case, with `-`, `_` or nothing),
      PLACEHOLDER or PLACEHOLDER_<WHAT>, an angle-bracket token such as `<account-id>`, four or more x
      (`arn:aws:iam::xxxxxxxxxxxx:role/x`), and upper-case TODO, FIXME or TBD; `boxxx`, `todo-app` or `v1.2`
      are not placeholders, and neither is the field documentation of a CustomResourceDefinition's schema.
      It is a warning; `--strict` makes it fail.""",
)
def placeholder_value(scope: Scope):
    for manifest in [*scope.objects, *([scope.cluster_config] if scope.cluster_config else [])]:
        secrets = None  # where the object's secrets are, once it has a placeholder
        for path, value in strings(manifest.doc):
            if value.startswith("ENC[") or _encoded(manifest, path) or _schema_text(manifest, path):
                continue  # SOPS ciphertext and base64 data: their letters are not words
            found = PLACEHOLDER.search(value)
            if not found:
                continue
            if secrets is None:
                secrets = secret_paths(manifest.doc)
            yield Finding(manifest, _placeholder_message(path, value, found, secrets.get(path)), path)


def _placeholder_message(path: tuple, value: str, found: re.Match, how: str | None) -> str:
    """What a placeholder finding says: the field and its value, but never a secret's value (a Secret's
    stringData, a credential-named field: the field alone) nor the secret part of a string."""
    where = ".".join(map(str, path))
    if how == WHOLE:
        return f"{where} holds a placeholder (a secret value, not shown)"
    spans = secret_spans(value) if how == TEXT else []
    if any(start < found.end() and found.start() < end for start, end in spans):
        return f"{where} is {_shown(mask_text(value))} (a placeholder in a secret value, not shown)"
    return f"{where} is {_shown(mask_text(value))} (placeholder {found.group(0)!r})"


def _schema_text(manifest, path: tuple) -> bool:
    """Inside a CRD's schema: field documentation such as Flux's "in the form of '<algorithm>:<checksum>'"
    (gotk-components.yaml), never a value anything is configured with."""
    return manifest.kind == "CustomResourceDefinition" and path[:1] == ("spec",) and "schema" in path


def _encoded(manifest, path: tuple) -> bool:
    sections = {"Secret": ("data",), "ConfigMap": ("binaryData",)}.get(manifest.kind, ())
    return manifest.group == "" and bool(path) and path[0] in sections


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 80 else repr(value[:77] + "...")


@rule(
    "suppression-invalid",
    "warning",
    suppressible=False,
    premise="An object carries an annotation validate.gitops/ignore-<id>.",
    consequence="risk",
    description="A suppression annotation has no reason or names no known rule",
    remediation='Write the annotation as validate.gitops/ignore-<rule-id>: "<why this is fine here>" with a rule '
    "id from docs/rules.md.",
    docs="""Suppressions are reviewed like code: each one must say why. One without a reason does not
      suppress anything, and one naming an unknown rule (a typo, or a rule that was renamed) is reported so it
      does not silently stop working. Either way the finding it meant to hide is still reported at its own
      severity, and nothing on the cluster fails, so it is a warning.""",
)
def suppression_invalid(scope: Scope):
    for manifest in [*scope.objects, *([scope.cluster_config] if scope.cluster_config else [])]:
        for key, value in manifest.annotations.items():
            key = str(key)
            if not key.startswith(SUPPRESSION_PREFIX):
                continue
            rule_id = key.removeprefix(SUPPRESSION_PREFIX)
            if rule_id not in REGISTRY:
                message = f"{key} names no rule {rule_id!r}"
            elif not str(value or "").strip():
                message = f"{key} gives no reason, so it suppresses nothing"
            else:
                continue
            yield Finding(manifest, message, ("metadata", "annotations", key))


# Object names (k8s.io/apimachinery pkg/api/validation NameIsDNSSubdomain, NameIsDNSLabel,
# NameIsDNS1035Label over pkg/util/validation IsDNS1123Subdomain, IsDNS1123Label, IsDNS1035Label; kubernetes
# pkg/apis/core/validation: ValidateNamespaceName is a DNS-1123 label, ValidateServiceName a DNS-1035 label).
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_1123_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_DNS_1123_LABEL = re.compile(rf"^{_DNS_LABEL}$")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_NAME_RULES = {
    ("Namespace", ""): (_DNS_1123_LABEL, 63, "a DNS-1123 label"),
    ("Service", ""): (_DNS_1035_LABEL, 63, "a DNS-1035 label"),
}
# RBAC names are path segments ("system:..." is valid); MPIJob names: mpijob-name-invalid.
_OTHER_NAMES = ("rbac.authorization.k8s.io", "kubeflow.org")
_YAML_TYPES = {int: "a number", float: "a number", bool: "a boolean", list: "a list", dict: "a mapping"}


@rule(
    "object-name-invalid",
    "error",
    premise="An object's metadata.name is written without Flux variables, and the object is not an RBAC kind or an "
    "MPIJob.",
    consequence="api-server",
    description="An object's name is not a valid Kubernetes name for its kind",
    remediation="Rename the object: lower-case letters, digits and '-' (and '.' except for Namespaces and "
    "Services), starting and ending with a letter or digit (a Service: starting with a letter).",
    docs="""The API server refuses an object whose name breaks its kind's rule, so Flux's apply of the whole
      Kustomization fails. Most kinds take a DNS-1123 subdomain (at most 253 characters of `a-z`, `0-9`, `-`
      and `.`); a Namespace takes a DNS-1123 label (at most 63, no dots), a Service a DNS-1035 label (a
      DNS-1123 label that starts with a letter). RBAC kinds (path-segment names) and MPIJobs
      (mpijob-name-invalid) are left to their own rules, and names with a Flux `${VARIABLE}` are checked
      after substitution only. A name YAML reads as a number or a boolean (`name: 5`) is refused too: the
      object's metadata does not decode.""",
)
def object_name_invalid(scope: Scope):
    for manifest in scope.objects:
        written = mapping(manifest.doc, "metadata").get("name")
        if written is not None and not isinstance(written, str):
            # YAML reads `name: 5` or `name: true` as a number or a boolean; ObjectMeta.name is a string, so
            # decoding the object fails before any name rule applies.
            yield Finding(
                manifest,
                f"{manifest.kind} name {written!r} is {_YAML_TYPES.get(type(written), 'not text')}, not a string: "
                "quote it",
                ("metadata", "name"),
            )
            continue
        name = manifest.name
        if not name or "$" in name or manifest.group in _OTHER_NAMES:
            continue
        pattern, limit, what = _NAME_RULES.get(
            (manifest.kind, manifest.group), (_DNS_1123_SUBDOMAIN, 253, "a DNS-1123 subdomain")
        )
        if len(name) > limit or not pattern.match(name):
            yield Finding(
                manifest,
                f"{manifest.kind} name {name!r} is not {what} of at most {limit} characters",
                ("metadata", "name"),
            )


# etcd refuses a request above its --max-request-bytes, 1.5 MiB by default (etcd.io/docs/v3.5/dev-guide/
# limit/); the API server refuses a ConfigMap or Secret whose data exceeds 1 MiB (kubernetes
# pkg/apis/core/validation: core.MaxSecretSize, used by ValidateConfigMap and ValidateSecret).
ETCD_REQUEST_LIMIT = 1536 * 1024
DATA_LIMIT = 1024 * 1024


def _data_bytes(manifest) -> int:
    """The bytes of a ConfigMap's or Secret's data, as the API server counts them (base64 decoded)."""
    encoded = ("binaryData",) if manifest.kind == "ConfigMap" else ("data",)
    total = 0
    for section in ("data", "binaryData", "stringData"):
        for key, value in mapping(manifest.doc, section).items():
            size = len(str(value or "").encode())
            total += len(str(key)) + (size * 3 // 4 if section in encoded else size)
    return total


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


@rule(
    "object-too-large",
    "error",
    premise="An object among the inputs is serialized larger than etcd takes, or is a ConfigMap or Secret with more "
    "data than the API server takes.",
    consequence="api-server",
    description="An object is larger than the API server and etcd accept",
    remediation="Keep large data out of the object: put files in S3 or FSx, or build them into the image; split "
    "a large ConfigMap into several.",
    docs="""etcd refuses a request above 1.5 MiB (its default `--max-request-bytes`), and the API server refuses
      a ConfigMap or Secret whose data holds more than 1 MiB; Flux's apply of the whole Kustomization fails
      with `etcdserver: request is too large` or `Too long`. The size is the object serialized as compact
      JSON, close to what the API server stores.""",
)
def object_too_large(scope: Scope):
    for manifest in scope.objects:
        if manifest.kind in ("ConfigMap", "Secret") and manifest.group == "":
            data = _data_bytes(manifest)
            if data > DATA_LIMIT:
                section = next(s for s in ("data", "binaryData", "stringData") if mapping(manifest.doc, s))
                yield Finding(
                    manifest,
                    f"{manifest.kind} {manifest.name} holds {_mib(data)} of data, more than the 1 MiB the API "
                    "server accepts",
                    (section,),
                )
                continue
        size = len(json.dumps(manifest.doc, separators=(",", ":"), default=str).encode())
        if size > ETCD_REQUEST_LIMIT:
            yield Finding(
                manifest,
                f"{manifest.kind} {manifest.name} is {_mib(size)} serialized, more than the 1.5 MiB etcd accepts",
            )
