"""Hostile input, injection: every human-facing output goes through one escaping."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml
from hostile import add_kustomization
from test_cli import environment

from eks_gpu_gitops.core.escaping import code_span, command_data, in_markdown, neutralise_commands, one_line

HOSTILE = [
    "x\n::error file=README.md::pwned",
    "x\r::add-mask::y",
    "  ::warning::z",
    "x ##[error]pwned",
    "##[set-output name=a]b",
    "\x1b]8;;http://evil\x07link\x1b]8;;\x07",
    "\x1b[2J\x1b[Hclear",
    "safe\u202egnp.exe",
    "zero\u2066width\u2069",
    "nul\x00byte",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_no_output_line_is_a_workflow_command_or_carries_control_characters(text):
    outputs = [(neutralise_commands(text), True), (one_line(text), True), (in_markdown(text), True)]
    outputs.append((command_data(text), False))  # an annotation's data: it follows `::error ...::` on its line
    for shown, starts_a_line in outputs:
        if starts_a_line:
            for line in shown.split("\n"):
                assert not line.lstrip().startswith("::"), shown
        assert "\n" not in shown or starts_a_line
        assert "##[" not in shown, shown
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]", shown), shown
    assert "\n" not in one_line(text)


@pytest.mark.parametrize(
    "name",
    ["a`b ![x](http://evil/p.png) [y](http://evil) @org/team", "``</code><img src=x>", "**bold** _i_ #1 ~~s~~"],
)
def test_a_name_in_a_notice_cannot_make_markup_a_link_an_image_or_a_mention(name):
    message = f"Flux Kustomization {code_span(name)} prunes; also {name}"
    shown = in_markdown(message)
    outside = re.sub(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", "", shown)  # what is not inside a code span
    assert "](" not in outside.replace("\\](", "").replace("\\]\\(", "")
    assert "<img" not in outside and "@org" not in outside and "**" not in outside.replace("\\*\\*", "")
    assert shown.count(code_span(name)) == 1  # the name is shown whole, in its own code span


def test_progress_lines_of_a_hostile_name_are_one_line_each(repo, tmp_path):
    add_kustomization(repo, "ok", "./overlays/prod/training")
    hostile = repo / "overlays/prod/training/hostile.yaml"
    hostile.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x\n::error::pwned ##[warning]"}})
    )
    kustomization = yaml.safe_load((repo / "overlays/prod/training/kustomization.yaml").read_text())
    kustomization["resources"].append("hostile.yaml")
    (repo / "overlays/prod/training/kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    result = subprocess.run(
        [str(repo / "scripts" / "validate"), "--env", "prod", "--format", "github"],
        cwd=repo,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    for line in (result.stdout + result.stderr).splitlines():
        assert not line.lstrip().startswith("::") or line.startswith(
            ("::error file=", "::warning file=", "::notice")
        ), line
        assert "##[" not in line, line
