"""Every environment round-trips through new-environment: an environment made with its instance type, size
and EFA choice renders and validates clean next to it, with settings of the same shape. A change to the bases
(overlays/base) that new environments could no longer be made from fails here, not on the next one."""

from __future__ import annotations

import pytest
import yaml
from conftest import environments, run, settings


def shape(value):
    """The keys of a settings document, without the values."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [shape(value[0])]
    return None


def options(env: str) -> list[str]:
    """new-environment's options for an environment like `env`, read from its settings."""
    current = settings(env)
    group = current["gpuNodeGroup"]
    given = [
        "--instance-type", group["instanceType"],
        "--nodes", str(group["maxSize"]),
        "--efa" if group.get("efaEnabled") else "--no-efa",
        "--region", current["cluster"]["region"],
        "--availability-zone", group["availabilityZones"][0],
        "--fsx-deployment-type", current["fsx"]["parameters"]["deploymentType"],
        "--fsx-capacity-gib", current["fsx"]["storage"].removesuffix("Gi"),
    ]  # fmt: skip
    reservation = (group.get("capacityReservation") or {}).get("capacityReservationTarget") or {}
    if reservation.get("capacityReservationID"):
        given += ["--capacity-reservation", reservation["capacityReservationID"]]
    if (group.get("instanceMarketOptions") or {}).get("marketType") == "capacity-block":
        given.append("--capacity-block")
    if group.get("spot"):
        given.append("--spot")
    if current["fsx"]["parameters"].get("s3ImportPath"):
        given += ["--fsx-s3-import-path", current["fsx"]["parameters"]["s3ImportPath"]]
    if current["fsx"].get("reclaimPolicy") == "Delete":
        given.append("--delete-fsx-with-claim")
    return given


@pytest.mark.parametrize("env", environments())
def test_an_environment_like_it_is_made_and_validates(env, copy):
    twin = f"{env[:14]}-twin"
    result = run(copy, "new-environment", twin, *options(env))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    made = yaml.safe_load((copy / "overlays" / twin / "settings.yaml").read_text())
    assert shape(made) == shape(settings(env))
    checked = run(copy, "validate", "--env", twin, "--quiet")
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-2000:]
