"""Write the instance catalogue into cookiecutter.json (`_gpu_catalog`).

cookiecutter.json cannot import Python, and cruft re-renders the template without local
Jinja extensions, so the template carries a generated copy of the catalogue's GPU figures.
`make sync-catalog` rewrites it; tests/test_catalog_sync.py fails when it drifts.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "{{cookiecutter.project_slug}}" / "scripts"))

from gitops_tools import catalog  # noqa: E402

def synced(context: dict) -> dict:
    by_size = sorted(catalog.GPU_INSTANCE_TYPES.values(), key=lambda t: (t.family, t.gpus, t.vcpus))
    context = dict(context)
    context["_gpu_catalog"] = {
        t.name: {"gpus": t.gpus, "efa": t.efa_interfaces, "vcpus": t.vcpus, "memory_gib": t.memory_gib}
        for t in by_size
    }
    # Raw `_` values must come before the `__` values rendered from them.
    def rank(key):
        return 2 if key == "__prompts__" else 1 if key.startswith("__") else 0
    return {key: context[key] for key in sorted(context, key=rank)}


def render(context: dict) -> str:
    return json.dumps(context, indent=2) + "\n"


if __name__ == "__main__":
    path = ROOT / "cookiecutter.json"
    path.write_text(render(synced(json.loads(path.read_text()))))
    print(f"wrote {path.relative_to(ROOT)}")
