"""README.md documents every option of the trainer's commands (the tables are written by hand)."""

import os

import pytest
from conftest import TRAINER_DIR

from horovod_trainer import index_data, prepare_data, synthetic_benchmark, train

with open(os.path.join(TRAINER_DIR, "README.md"), encoding="utf-8") as handle:
    README = handle.read()


@pytest.mark.parametrize("module", [train, prepare_data, index_data, synthetic_benchmark], ids=lambda m: m.PROG)
def test_every_option_is_documented(module):
    missing = [option.flag for option in module.OPTIONS if f"`{option.flag}`" not in README]
    assert missing == [], f"{module.PROG}: README.md does not mention {missing}"


def test_train_table_names_each_environment_variable():
    missing = [option.env for option in train.OPTIONS if f"`{option.env}`" not in README]
    assert missing == []
