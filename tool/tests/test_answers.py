"""The answer checks the hook and the generators share, one good and one bad case each."""

from __future__ import annotations

import json

import pytest
from conftest import TEMPLATE

from eks_gpu_gitops.facts import catalog, fsx
from eks_gpu_gitops.generate import answers


@pytest.mark.parametrize(
    "slug, ok",
    [
        ("x", True),
        ("vision-team-1", True),
        ("-x", False),
        ("X", False),
        ("a" * 63, True),
        ("a" * 64, False),
        ("a_b", False),
    ],
)
def test_slug(slug, ok):
    assert (answers.check_slug(slug) is None) is ok


@pytest.mark.parametrize(
    "az, region, ok",
    [
        ("us-west-2a", "us-west-2", True),
        ("us-west-2", "us-west-2", False),
        ("us-west-2ab", "us-west-2", False),
        ("eu-west-1a", "us-west-2", False),
    ],
)
def test_availability_zone(az, region, ok):
    assert (answers.check_availability_zone(az, region) is None) is ok


# auto, on and off only: a stricter answer set than booleans, so a typo never turns EFA on or off.
@pytest.mark.parametrize(
    "choice, instance, expected",
    [
        ("auto", "p4d.24xlarge", True),
        ("auto", "g5.xlarge", False),
        ("off", "p5.48xlarge", False),
        ("on", "g5.8xlarge", True),
        ("on", "g6.4xlarge", None),
        ("yes", "p4d.24xlarge", None),
        ("true", "p4d.24xlarge", None),
        ("ON", "p4d.24xlarge", None),
        ("no", "p4d.24xlarge", None),
    ],
)
def test_efa(choice, instance, expected):
    enabled, problem = answers.parse_efa(choice, instance)
    assert enabled is expected
    assert (problem is None) is (expected is not None)


@pytest.mark.parametrize(
    "question, counted, fix",
    [
        ("gpu_node_count", None, "give a number of nodes, 1 or more"),
        ("--workers", "workers", "give a number of workers, 1 or more"),
        ("--gpus-per-worker", "GPUs", "give a number of GPUs, 1 or more"),
    ],
)
def test_count_message_names_what_is_counted(question, counted, fix):
    args = (question,) if counted is None else (question, counted)
    assert answers.parse_count("0", *args) == (None, f"{question}: '0' is less than 1; {fix}")
    assert answers.parse_count("two", *args)[1] == f"{question}: 'two' is not a whole number; {fix}"


@pytest.mark.parametrize(
    "name, prefix, ok",
    [("staging", "x", True), ("a" * 63, "c" * 36, True), ("a" * 63, "c" * 37, False), ("Stage", "x", False)],
)
def test_environment_name_keeps_the_eks_cluster_name_valid(name, prefix, ok):
    assert (answers.check_environment_name(name, prefix) is None) is ok


@pytest.mark.parametrize(
    "deployment, gib, ok",
    [
        ("SCRATCH_1", 1200, True),
        ("SCRATCH_1", 2400, True),
        ("SCRATCH_1", 3600, True),
        ("SCRATCH_1", 7200, True),
        ("SCRATCH_1", 4800, False),
        ("SCRATCH_2", 1200, True),
        ("SCRATCH_2", 2400, True),
        ("SCRATCH_2", 4800, True),
        ("SCRATCH_2", 3600, False),
        ("PERSISTENT_2", 1000, False),
        ("PERSISTENT_1", 0, False),
    ],
)
def test_fsx_capacity(deployment, gib, ok):
    assert (fsx.capacity_error(deployment, gib) is None) is ok


def test_hdd_capacity_depends_on_throughput():
    assert fsx.capacity_error("PERSISTENT_1", 6000, "HDD", 12) is None
    assert fsx.capacity_error("PERSISTENT_1", 1800, "HDD", 12) is not None
    assert fsx.capacity_error("PERSISTENT_1", 1800, "HDD", 40) is None


@pytest.mark.parametrize(
    "path, bucket",
    [
        ("s3://my-bucket", "my-bucket"),
        ("s3://my-bucket/a/b", "my-bucket"),
        ("my-bucket/a", None),
        ("s3://", None),
        ("s3://UPPER", None),
    ],
)
def test_s3_bucket(path, bucket):
    assert fsx.s3_bucket(path) == bucket


def test_all_problems_reported_in_question_order():
    good = {
        "project_slug": "x",
        "aws_region": "us-west-2",
        "availability_zone": "us-west-2a",
        "kubernetes_version": "1.34",
        "cluster_name": "x",
        "gpu_instance_type": "p4d.24xlarge",
        "gpu_node_count": "2",
        "efa": "auto",
        "fsx_deployment_type": "SCRATCH_2",
        "fsx_capacity_gib": "1200",
        "fsx_s3_import_path": "",
        "trainer_image_repository": "ghcr.io/org/trainer",
        "_trainer_image_tag": "0.1.0",
        "git_repository_url": "https://github.com/org/x",
        "git_branch": "main",
    }
    assert answers.check_answers(good) == []
    bad = good | {"project_slug": "X", "gpu_node_count": "0", "dev_gpu_spot": "y", "git_branch": "a..b"}
    problems = answers.check_answers(bad)
    assert [p.split(":")[0] for p in problems] == ["project_slug", "gpu_node_count", "dev_gpu_spot", "git_branch"]


def test_the_default_instance_types_are_gpu_types_of_the_catalogue():
    context = json.loads((TEMPLATE / "cookiecutter.json").read_text())
    for key in ("gpu_instance_type", "_dev_instance_type"):
        assert answers.check_gpu_instance_type(context[key]) is None, key
    assert catalog.lookup(context["_system_instance_type"]).gpus == 0


@pytest.mark.parametrize(
    "env, production",
    [
        ("prod", True),
        ("production", True),
        ("prod-eu", True),
        ("production-2", True),
        ("product", False),
        ("prod_eu", False),
        ("preprod", False),
        ("dev", False),
    ],
)
def test_spot_is_refused_in_production_environments_only(env, production):
    """One name rule (model/scope.py is_production): prod, production and their prod-*/production-* variants."""
    problem = answers.check_spot(env, efa=False, reservation="")
    assert (problem is not None and "is a production environment" in problem) == production, problem
