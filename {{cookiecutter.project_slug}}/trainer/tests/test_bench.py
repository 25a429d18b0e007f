"""The benchmark's parts: the plain-Keras reference run and the table. (`make bench` runs it whole;
its Horovod runs are the trainer runs tested elsewhere.)"""

from conftest import read_json, run_module

from horovod_trainer.bench import format_table


def test_plain_keras_reference_measures_throughput(data_dir, tmp_path):
    stats_file = str(tmp_path / "keras.json")
    completed = run_module(
        "keras_baseline", ["--data-dir", data_dir, "--epochs", "3", "--batch-size", "64", "--stats-file", stats_file]
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    stats = read_json(stats_file)
    assert stats["train_samples_per_second"] > 0
    assert stats["device"].startswith(("CPU", "GPU"))


def test_table_aligns_columns_and_keeps_ratios():
    table = format_table(
        [
            ("plain Keras, no Horovod", 1, 1234.4, "1.00", "CPU (2 of 2 cores)"),
            ("horovodrun -np 2", 2, 20000.0, "1.62 x -np 1", "GPU 0"),
        ]
    ).splitlines()
    assert len(table) == 4 and set(table[1]) <= {"-", " "}
    assert "20,000" in table[3] and table[3].index("20,000") == table[2].index("1,234")
    assert "1.62 x -np 1" in table[3]
