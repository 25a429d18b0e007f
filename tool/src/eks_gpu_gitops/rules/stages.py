"""Rules whose findings come from a pipeline stage rather than a check function: yamllint on the
sources, and the schema check of every rendered object (the runner's own rule-failed is in the registry)."""

from __future__ import annotations

from .registry import stage_rule

YAML_LINT = stage_rule(
    "yaml-lint",
    "error",
    "source",
    category="Sources and schemas",
    description="A YAML source breaks a rule of its repository's .yamllint, or repeats a key",
    remediation="Fix the line as yamllint's message says (or change .yamllint, or add a "
    "`# yamllint disable-line rule:<rule>` comment).",
    docs="""yamllint runs on the sources validate reads (clusters/, overlays/, and the files named on the
    command line), each with the `.yamllint` of the repository the file itself lives in, wherever validate
    runs from; each problem keeps yamllint's own level (error or warning) and rule name. A file outside any
    repository made by the template is held to no style: only a repeated key (whose later value silently
    wins) is reported there. A file that is not valid YAML stops validate with exit status 2.""",
)

SCHEMA_INVALID = stage_rule(
    "schema-invalid",
    "error",
    "schema",
    category="Sources and schemas",
    description="An object does not match its schema",
    remediation="Fix the field named in the message: a misspelt or misplaced key, or a value of the wrong type.",
    docs="""Built-in kinds are checked with kubernetes-validate's strict schemas for the environment's
    Kubernetes version (the ClusterConfig's `metadata.version`); MPIJob and the Flux kinds with their CRD's
    openAPIV3Schema, where every object that lists its properties rejects unknown ones (the API server
    would silently drop them); the ClusterConfig with eksctl's JSON schema. CRD and eksctl schemas are the
    pinned upstream files of platform.yaml, cached after the first download; `--schema-dir` or
    GITOPS_SCHEMA_DIR use a local copy.""",
)

SCHEMA_MISSING = stage_rule(
    "schema-missing",
    "warning",
    "schema",
    category="Sources and schemas",
    description="An object's kind has no schema, so nothing about it could be checked",
    remediation="Pin the CRD of the kind in platform.yaml under schemas (group/Kind: URL of the CRD file), or "
    "render the CRD with the manifests.",
    docs="""An object validate cannot check is reported, never passed silently. Custom resources get their
    schema from platform.yaml's pinned CRDs or from a CustomResourceDefinition in the rendered output. It is a
    warning: a custom resource of an operator the repository does not pin is legitimate, only unchecked (the
    API server still validates it against the installed CRD); `--strict` makes it fail. A built-in kind whose
    API version is removed is reported by removed-api instead, as an error.""",
)
