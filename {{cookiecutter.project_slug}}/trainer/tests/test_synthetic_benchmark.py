"""The synthetic-data benchmark under horovodrun -np 2: both phases run, rank 0 prints the table."""

import pytest
from conftest import TRAINER_DIR, child_env, read_json

from horovod_trainer import local_launch
from horovod_trainer.synthetic_benchmark import format_table, mean_and_interval


def test_two_processes_print_images_per_second_and_scaling_efficiency(tmp_path):
    import subprocess

    stats_file = tmp_path / "bench.json"
    args = ["--width", "0.0625", "--image-size", "32", "--num-classes", "10", "--batch-size", "8"]
    args += ["--num-warmup-batches", "2", "--num-iters", "3", "--num-batches-per-iter", "2"]
    args += ["--stats-file", str(stats_file)]
    completed = subprocess.run(
        local_launch.horovodrun_command(2, "synthetic_benchmark", args),
        cwd=TRAINER_DIR,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-4000:]
    chief = [line.split(":", 1)[1] for line in completed.stdout.splitlines() if line.startswith("[0]<stdout>:")]
    table = chief[chief.index(next(line for line in chief if line.startswith("synthetic benchmark: "))) :]
    assert table[1].split() == ["phase", "processes", "img/s", "per", "GPU", "img/s", "total", "scaling", "efficiency"]
    assert table[3].startswith("alone (one GPU, no communication)") and table[3].rstrip().endswith("1.00")
    assert table[4].startswith("horovod (allreduce)")
    stats = read_json(stats_file)
    assert stats["processes"] == 2
    assert all(len(rates) == 2 and min(rates) > 0 for rates in stats["per_rank"].values())
    per_gpu = stats["images_per_second_per_gpu"]
    assert stats["scaling_efficiency"] == pytest.approx(per_gpu["horovod"] / per_gpu["alone"])
    assert stats["images_per_second_total"]["horovod"] == pytest.approx(sum(stats["per_rank"]["horovod"]))
    assert f"{stats['scaling_efficiency']:.2f}" in table[4]


def test_interval_and_table_layout():
    mean, half_width = mean_and_interval([100.0, 110.0, 90.0])
    assert mean == pytest.approx(100.0) and half_width == pytest.approx(1.96 * 10.0)
    lines = format_table("title", [("alone", "8", "1,000.0 +-2.0", "8,000.0", "1.00")]).splitlines()
    assert (
        lines[0] == "title"
        and set(lines[2]) <= {"-", " "}
        and lines[3].index("8,000.0") == lines[1].index("img/s total")
    )
