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
    premise="The file is a source validate reads; a style rule applies only where the file's own repository has "
    "a .yamllint.",
    consequence="configured",
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
    openAPIV3Schema, where every object that lists its properties rejects unknown ones: Flux applies
    with server-side apply, which refuses a field its schema does not declare (fluxcd/pkg#1016: strict is
    the only way server-side apply works), so one unknown field fails the whole Kustomization; the
    ClusterConfig with eksctl's JSON schema, corrected where eksctl accepts what that file refuses (an
    identity provider's `type`, remote networks without `vpcGatewayID`). CRD and eksctl schemas are the
    pinned upstream files of platform.yaml, cached after the first download; `--schema-dir` or
    GITOPS_SCHEMA_DIR use a local copy. A value that still holds a `${VARIABLE}` is not type-checked where
    something will still substitute it (in folder mode, a template's script; in a repository, a Flux
    Kustomization with `postBuild`, for variables only the cluster has); elsewhere Flux applies it as written
    and it is checked so. In folder mode, a YAML file none of whose
    documents has an apiVersion or a kind (Helm values, a compose file) is named in a note and not checked.""",
    premise="The object's apiVersion and kind have a schema: a built-in kind, a pinned CRD, or a CRD rendered with it.",
    consequence="api-server",
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
    premise="An object's apiVersion and kind match no built-in schema, pinned CRD or rendered CRD.",
    consequence="unchecked",
)

CRD_RULE_VIOLATED = stage_rule(
    "crd-rule-violated",
    "error",
    "schema",
    category="Sources and schemas",
    description="A custom resource breaks an x-kubernetes-validations (CEL) rule of its CRD",
    remediation="Change the field the message names so the CRD's rule holds (its message says what it requires).",
    docs="""The CEL rules a CRD carries in its schema (`x-kubernetes-validations`) are evaluated on every object
    of its kind the way the API server evaluates them on create, by the helper with
    k8s.io/apiextensions-apiserver v0.36.4's own code: unknown fields pruned and the schema's defaults applied
    first, the API server's cost limits (1,000,000 per expression, 10,000,000 per object; k8s.io/apiserver
    pkg/apis/cel/config.go), transition rules (those reading `oldSelf`) skipped since there is no old object.
    As in the API server, an object with a schema error that stops validation early (a missing required field, a
    value of the wrong type or outside its enum, too long or too many) is not evaluated: schema-invalid reports
    it, and a note says so. The message names the field and gives the rule's `message` as the
    CRD states it, never a value of the object: a `messageExpression`'s result can quote any value, so it is
    not shown. A field that still holds a `${VARIABLE}` something will substitute is not judged (a note). Rules that run
    out of the cost budget are reported too: the API server rejects the object then as well. The CRD is the one
    schema-invalid uses: pinned in platform.yaml, or rendered with the manifests.""",
    premise="The object's kind comes from a CRD (pinned or rendered) whose schema for its version carries "
    "x-kubernetes-validations rules.",
    consequence="api-server",
)
