"""Whether Kueue runs in the environment, and what its configuration says of jobs without a queue label
(kubernetes-sigs/kueue v0.19.2)."""

from __future__ import annotations

import yaml

from ..core import yaml_limits
from .fields import mapping, sequence
from .placement import chart_named
from .queues import GROUP

# Kueue's manager reads its Configuration from this key of the ConfigMap kueue-manager-config, in the release
# manifests (config/components/manager, named with config/default's namePrefix kueue-) as in the chart
# (charts/kueue/templates/manager/manager-config.yaml, <fullname>-manager-config).
CONFIG_KEY = "controller_manager_config.yaml"


def releases(scope) -> list:
    """The HelmReleases of Kueue's chart."""
    return [m for m in scope.of("HelmRelease") if chart_named(m, ("kueue",))]


def _config_maps(scope) -> list:
    return [m for m in scope.of("ConfigMap") if "kueue" in m.name and CONFIG_KEY in mapping(m.doc, "data")]


def installed(scope) -> bool:
    """Kueue's objects, its chart or its manager's configuration among the environment's."""
    return any(m.group == GROUP for m in scope.objects) or bool(releases(scope) or _config_maps(scope))


def _parse(text) -> dict | None:
    """The Configuration in `text`; None when it is no mapping, or past the limits of the bounded loader."""
    if not isinstance(text, str):
        return None
    try:
        config = yaml_limits.load(text)
    except (yaml.YAMLError, ValueError):  # ValueError: a timestamp PyYAML matches but cannot build
        return None
    return config if isinstance(config, dict) else None


def _configurations(scope) -> list[dict | None]:
    """Every Kueue Configuration the environment shows, None for one it does not show whole: a HelmRelease's inline
    managerConfig.controllerManagerConfigYaml (the chart's default sets nothing of interest here, charts/kueue/
    values.yaml; valuesFrom may replace it), and the manager's ConfigMaps."""
    found = []
    for release in releases(scope):
        spec = mapping(release.doc, "spec")
        text = mapping(spec, "values", "managerConfig").get("controllerManagerConfigYaml")
        if text is not None:
            found.append(_parse(text))
        else:
            found.append(None if sequence(spec, "valuesFrom") else {})
    found += [_parse(mapping(m.doc, "data")[CONFIG_KEY]) for m in _config_maps(scope)]
    return found


def manages_unlabelled(scope) -> bool | None:
    """Whether Kueue manages jobs without a queue label (manageJobsWithoutQueueName, false by default,
    apis/config/v1beta2): such a job is then suspended until Kueue admits it, never started at once. False where
    Kueue is not installed; None where it is but its configuration is not visible whole."""
    if not installed(scope):
        return False
    configurations = _configurations(scope)
    if any(c is not None and c.get("manageJobsWithoutQueueName") is True for c in configurations):
        return True
    if not configurations or None in configurations:
        return None
    return False
