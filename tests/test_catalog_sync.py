"""cookiecutter.json carries a generated copy of the catalogue; it must not drift."""

import json
import sys

from conftest import TEMPLATE

sys.path.insert(0, str(TEMPLATE / "tools"))

import sync_catalog  # noqa: E402


def test_cookiecutter_json_matches_catalogue():
    text = (TEMPLATE / "cookiecutter.json").read_text()
    expected = sync_catalog.render(sync_catalog.synced(json.loads(text)))
    assert text == expected, "cookiecutter.json is out of date: run `make sync-catalog`"


def test_defaults_are_in_the_catalogue():
    context = json.loads((TEMPLATE / "cookiecutter.json").read_text())
    for key in ("gpu_instance_type", "_dev_instance_type"):
        assert context[key] in context["_gpu_catalog"]
