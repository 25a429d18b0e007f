"""What a kustomization file names: the files and folders a build reads besides the kustomization itself."""

from __future__ import annotations

# Fields of a kustomization file that name files or folders (kustomize api/types/kustomization.go).
_PATH_LISTS = (
    "resources",
    "bases",
    "components",
    "crds",
    "configurations",
    "generators",
    "transformers",
    "validators",
    "patchesStrategicMerge",
)
_PATH_ITEMS = ("patches", "patchesJson6902", "replacements")
_GENERATORS = ("configMapGenerator", "secretGenerator")


def named_paths(doc: dict):
    """(field, path) for every file or folder a kustomization file names."""
    for field in _PATH_LISTS:
        for value in doc.get(field) or []:
            if isinstance(value, str) and "\n" not in value:
                yield field, value
    for field in _PATH_ITEMS:
        for item in doc.get(field) or []:
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                yield f"{field}.path", item["path"]
    for field in _GENERATORS:
        for item in doc.get(field) or []:
            if not isinstance(item, dict):
                continue
            for key in ("files", "envs"):
                for value in item.get(key) or []:
                    if isinstance(value, str):
                        yield f"{field}.{key}", value.partition("=")[2] or value
            if isinstance(item.get("env"), str):
                yield f"{field}.env", item["env"]
    openapi = doc.get("openapi")
    if isinstance(openapi, dict) and isinstance(openapi.get("path"), str):
        yield "openapi.path", openapi["path"]
    helm = doc.get("helmGlobals")
    if isinstance(helm, dict) and isinstance(helm.get("chartHome"), str):
        yield "helmGlobals.chartHome", helm["chartHome"]
