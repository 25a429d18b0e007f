"""Amazon FSx for Lustre rules: deployment types, storage capacity, throughput, S3 links.

Sizes follow the FSx API and the CSI driver's rounding (`RoundUpVolumeSize`): asking for a
size the API does not accept silently buys a bigger file system, so the template and the
validator insist on exact sizes.
"""

from __future__ import annotations

import re

DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
SCRATCH_TYPES = ("SCRATCH_1", "SCRATCH_2")
# INTELLIGENT_TIERING is in the FSx API; the CSI driver passes it through without size rounding.
STORAGE_TYPES = ("SSD", "HDD", "INTELLIGENT_TIERING")

# MB/s per TiB accepted by perUnitStorageThroughput, keyed by (deployment type, storage type).
_THROUGHPUTS = {
    ("PERSISTENT_1", "SSD"): (50, 100, 200),
    ("PERSISTENT_1", "HDD"): (12, 40),
    ("PERSISTENT_2", "SSD"): (125, 250, 500, 1000),
}
# What the template writes for persistent types when the user does not choose.
DEFAULT_THROUGHPUT = {"PERSISTENT_1": 200, "PERSISTENT_2": 250}

_S3_PATH = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/[^\s]*)?$")


def valid_throughputs(deployment_type: str, storage_type: str = "SSD") -> tuple[int, ...]:
    return _THROUGHPUTS.get((deployment_type, storage_type), ())


def capacity_error(
    deployment_type: str, capacity_gib: int, storage_type: str = "SSD", throughput: int | None = None
) -> str | None:
    """Why `capacity_gib` is not a size FSx creates exactly, or None when it is."""
    if storage_type == "HDD":
        step = 6000 if throughput == 12 else 1800
        if capacity_gib < step or capacity_gib % step:
            return f"HDD file systems at this throughput come in multiples of {step} GiB"
        return None
    if deployment_type == "SCRATCH_1":
        if capacity_gib in (1200, 2400) or (capacity_gib >= 3600 and capacity_gib % 3600 == 0):
            return None
        return "SCRATCH_1 takes 1200, 2400 or a multiple of 3600 GiB"
    if capacity_gib == 1200 or (capacity_gib >= 2400 and capacity_gib % 2400 == 0):
        return None
    return f"{deployment_type} takes 1200 or a multiple of 2400 GiB"


def supports_s3_import(deployment_type: str) -> bool:
    # PERSISTENT_2 links S3 through data repository associations, which the CSI driver does not create.
    return deployment_type in ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1")


def s3_bucket(path: str) -> str | None:
    """The bucket of an `s3://bucket[/prefix]` path, or None when the path has another form."""
    match = _S3_PATH.match(path)
    return match.group(1) if match else None
