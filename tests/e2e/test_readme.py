"""Issue 25, point 7: the generated README's "From nothing to a running job" (docs/operations.md) and its Quick
start, checked against the loop: every command they show either runs here (in a test below, in test_job.py, or as
a step of the harness) or is listed in CANNOT_RUN with the reason. A command added to either section fails
test_every_command_is_run_or_said_why_not until it is placed in one of the two tables."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import yaml

from . import sources

# Command prefix -> where it runs.
RUNS = {
    "scripts/render": "test_scripts_render_writes_the_clusterconfig_the_nodes_come_from",
    "scripts/validate": "test_scripts_validate_accepts_the_served_repository",
    "git tag": "test_the_release_tag_pushes_to_the_git_server (the image workflow it triggers cannot run: below)",
    "scripts/cluster-settings --env": "the harness (loop.py write_cluster_settings), with --subnet-id, "
    "--security-group-id and --print: without them it asks the AWS CLI",
    "flux bootstrap git": "the harness (loop.py bootstrap, flux.py bootstrap_documents): the GitRepository and "
    "Kustomization flux-system that `flux bootstrap git --path=clusters/<env>` writes, pointing at the loopback server",
    "scripts/status --env": "test_job.py test_scripts_status_is_all_ok",
    "flux get kustomizations": "test_flux_get_kustomizations_lists_every_kustomization_ready (without --watch)",
    "kubectl -n training get": "test_kubectl_shows_the_job_its_pods_and_the_claim",
    "scripts/new-job fabric": "test_scripts_new_job_fabric_is_accepted (written and validated, not merged)",
}
# Command prefix -> why it cannot run here.
CANNOT_RUN = {
    "make setup": "installs the eks-gpu-gitops version requirements.txt pins from a package index; the loop runs the "
    "tool under test instead (EKS_GPU_GITOPS, which scripts/tool honours)",
    "eksctl create cluster": "creates AWS resources; its stand-in is the kwok nodes made from that very ClusterConfig "
    "(loop.py make_nodes, checked by test_scripts_render_writes_the_clusterconfig_the_nodes_come_from)",
    "flux bootstrap github": "talks to the GitHub API; `flux bootstrap git` stands in (above)",
    "kubectl -n training logs": "kwok runs no container, so a launcher has no log",
}


def _section(text: str, title: str) -> str:
    rest = text[text.index(title) + len(title) :]
    end = re.search(r"\n## ", rest)
    return rest[: end.start()] if end else rest


def section_commands(clone) -> list[str]:
    """The commands of README.md's Quick start and docs/operations.md's "From nothing to a running job": each line
    of their sh blocks (comments dropped) and each inline command in their prose."""
    texts = [
        _section((clone / "README.md").read_text(), "## Quick start"),
        _section((clone / "docs" / "operations.md").read_text(), "## From nothing to a running job"),
    ]
    commands = []
    for text in texts:
        for block in re.findall(r"```sh\n(.*?)```", text, re.S):
            commands.extend(c for c in (re.sub(r"\s+#\s.*$", "", line).strip() for line in block.splitlines()) if c)
        commands.extend(re.findall(r"`((?:scripts/|flux |kubectl |eksctl |make |git )[^`]*)`", text))
    return commands


def test_every_command_is_run_or_said_why_not(loop):
    commands = section_commands(loop.clone)
    assert commands, "no command found in the README's Quick start nor in docs/operations.md's section"
    unplaced = [c for c in commands if not any(c.startswith(prefix) for prefix in (*RUNS, *CANNOT_RUN))]
    assert not unplaced, (
        "commands of the README's 'From nothing to a running job' that the e2e neither runs nor explains "
        f"(add each to RUNS with its test, or to CANNOT_RUN with the reason): {unplaced}"
    )


def _ran(done: subprocess.CompletedProcess, what: str) -> str:
    assert done.returncode == 0, f"{what} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


def test_scripts_render_writes_the_clusterconfig_the_nodes_come_from(loop):
    _ran(loop.script("render"), "scripts/render")
    _ran(loop.script("render", "--env", loop.env), f"scripts/render --env {loop.env}")
    config = yaml.safe_load((loop.clone / "rendered" / loop.env / "eksctl.yaml").read_text())
    groups = {g["name"]: g for key in ("managedNodeGroups", "nodeGroups") for g in config.get(key) or []}
    made = {g["name"]: g for g in loop.node_groups}
    assert set(groups) == set(made), (
        f"rendered/{loop.env}/eksctl.yaml has node groups {sorted(groups)}, the kwok nodes stand in for {sorted(made)}"
    )
    for name, group in groups.items():
        assert (group.get("instanceType"), group.get("maxSize")) == (made[name]["instanceType"], made[name]["nodes"]), (
            f"node group {name}: eksctl.yaml says {group.get('instanceType')} x maxSize {group.get('maxSize')}, "
            f"the kwok nodes are {made[name]['instanceType']} x {made[name]['nodes']}"
        )


def test_scripts_validate_accepts_the_served_repository(loop):
    _ran(loop.script("validate"), "scripts/validate")


def test_the_release_tag_pushes_to_the_git_server(loop):
    tags = [line for line in section_commands(loop.clone) if line.startswith("git tag ")]
    assert tags, "the README shows no `git tag` command"
    tag = tags[0].split()[2]
    sources.git(loop.clone, "tag", tag)
    sources.git(loop.clone, "push", "--quiet", "origin", tag)
    remote = sources.git(loop.clone, "ls-remote", "--tags", "origin", tag)
    assert f"refs/tags/{tag}" in remote, f"tag {tag} is not on the loopback server after `git push origin {tag}`"


def _flux() -> str:
    flux = os.environ.get("GITOPS_FLUX") or shutil.which("flux")
    assert flux, "the flux CLI is neither $GITOPS_FLUX nor on PATH (make flux in the template builds it)"
    return flux


def test_flux_get_kustomizations_lists_every_kustomization_ready(loop):
    out = _ran(
        subprocess.run(
            [_flux(), "get", "kustomizations", "-A"],
            env=loop.tool_environment(),
            capture_output=True,
            text=True,
            timeout=60,
        ),
        "flux get kustomizations -A",
    )
    rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
    names = {row[1] for row in rows}
    assert {"flux-system", "infrastructure", "training"} <= names, f"flux get kustomizations lists {sorted(names)}"
    not_ready = [" ".join(row) for row in rows if "True" not in row]
    assert not not_ready, "flux get kustomizations shows Kustomizations not Ready:\n" + "\n".join(not_ready)


def test_kubectl_shows_the_job_its_pods_and_the_claim(loop):
    out = _ran(
        subprocess.run(
            ["kubectl", "-n", "training", "get", "mpijob,pods,pvc"],
            env=loop.tool_environment(),
            capture_output=True,
            text=True,
            timeout=60,
        ),
        "kubectl -n training get mpijob,pods,pvc",
    )
    for expected in (
        "mpijob.kubeflow.org/horovod-train",
        "pod/horovod-train-launcher-",
        "pod/horovod-train-worker-0",
        "persistentvolumeclaim/fsx-training",
    ):
        assert expected in out, f"kubectl -n training get mpijob,pods,pvc does not show {expected}:\n{out}"
    claim = next(line for line in out.splitlines() if "persistentvolumeclaim/fsx-training" in line)
    assert " Bound " in f" {claim} ", f"the claim is not Bound: {claim}"


def test_scripts_new_job_fabric_is_accepted(loop, tmp_path):
    """In a copy of the clone: written and validated (the fabric test needs GPUs to run, and would queue behind
    the running job here)."""
    copy = tmp_path / "copy"
    subprocess.run(["git", "clone", "--quiet", str(loop.clone), str(copy)], check=True)
    done = subprocess.run(
        [str(copy / "scripts" / "new-job"), "fabric", "--env", loop.env, "--kind", "nccl-tests"],
        cwd=copy,
        env=loop.tool_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    _ran(done, f"scripts/new-job fabric --env {loop.env} --kind nccl-tests")
    assert (copy / "overlays" / loop.env / "training" / "mpijob-fabric.yaml").exists(), (
        f"scripts/new-job fabric wrote no overlays/{loop.env}/training/mpijob-fabric.yaml: {done.stdout}"
    )
