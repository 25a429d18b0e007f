"""Hygiene and security rules: pinned images, no committed credentials, the right workload kind."""

from __future__ import annotations

import re

from ..model import GPU, Scope, mapping, sequence
from ..model.fields import strings
from ..model.mpi import runs_mpi
from .registry import REGISTRY, SUPPRESSION_PREFIX, Finding, category

rule = category("Hygiene and security")

_PLACEHOLDER = re.compile(r"REPLACE[-_]ME", re.IGNORECASE)
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
    production_severity="error",
    description="A workload's image is untagged or tagged latest",
    remediation="Pin the image to a version tag or a digest (in kustomize: images[].newTag or digest).",
    docs="""A moving tag makes the same commit run different code on each pull: workers of one MPI world can
      even run different builds, and a rollback does not roll back. An error in production environments
      (named prod, production, or prod-...), a warning elsewhere.""",
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
    "env-literal-credential",
    "error",
    description="A container's env holds a literal credential",
    remediation="Read the value from a Secret (env[].valueFrom.secretKeyRef) created outside Git or encrypted "
    "with SOPS, or use IAM roles (EKS Pod Identity) instead of keys.",
    docs="""Everything in the repository is readable by everyone with access to it and stays in its history.
      The rule flags env entries whose name looks like a credential (password, secret, token, api key, access
      key) with a literal value, and any value that looks like an AWS access key id.""",
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
    "error",
    description="A Secret with data is committed in plain text",
    remediation="Keep the Secret out of Git (create it with the cluster's secret store) or encrypt it with SOPS "
    "and Flux's decryption.",
    docs="""Secret data is only base64-encoded, not encrypted. A SOPS-encrypted Secret (one with a `sops`
      section) is accepted.""",
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
    "error",
    description="A batch Job with parallelism above 1 runs mpirun or horovodrun",
    remediation="Run distributed training as an MPIJob (kubeflow.org/v2beta1): one launcher runs mpirun, "
    "workers run sshd.",
    docs="""The pods of a parallel Job are independent: each one starts its own mpirun with its own world, so
      N pods train N separate models (each on the whole data set) instead of one model on N workers. The MPI
      operator builds the hostfile and SSH keys that join the pods into one world.""",
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
    "error",
    description="A HorizontalPodAutoscaler scales on nvidia.com/gpu, which is not a resource metric",
    remediation="Scale on a GPU utilisation metric from an exporter (DCGM) through the custom or external "
    "metrics API, or drop the HPA for training jobs.",
    docs="""Resource metrics come from the metrics server, which only knows cpu and memory; an HPA on
      nvidia.com/gpu never gets a value and never scales (it reports FailedGetResourceMetric).""",
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
    description="A value is still a REPLACE-ME placeholder",
    remediation="Replace the placeholder with the real value; a per-cluster value (such as the FSx subnet and "
    "security group) belongs in the cluster-settings ConfigMap that Flux substitutes (scripts/cluster-settings).",
    docs="""`subnet-REPLACE-ME` and the like are valid YAML and pass the schemas, but FSx cannot create a file
      system with them and the claim stays Pending. The template writes none (per-cluster values come from
      the cluster-settings ConfigMap as `${FSX_SUBNET_ID}` and the like), so one here was written by hand.
      It is a warning; `--strict` makes it fail.""",
)
def placeholder_value(scope: Scope):
    for manifest in [*scope.objects, *([scope.cluster_config] if scope.cluster_config else [])]:
        for path, value in strings(manifest.doc):
            if not _PLACEHOLDER.search(value):
                continue
            yield Finding(manifest, f"{'.'.join(map(str, path))} is {value!r}", path)


@rule(
    "suppression-invalid",
    "error",
    suppressible=False,
    description="A suppression annotation has no reason or names no known rule",
    remediation='Write the annotation as validate.gitops/ignore-<rule-id>: "<why this is fine here>" with a rule '
    "id from docs/rules.md.",
    docs="""Suppressions are reviewed like code: each one must say why. One without a reason does not
      suppress anything, and one naming an unknown rule (a typo, or a rule that was renamed) is reported so it
      does not silently stop working.""",
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
