"""Real multi-process training under horovodrun (Gloo, CPU)."""

import os

from conftest import flags, rank_lines, read_json, run_horovod, run_module, steps_per_epoch


def test_two_ranks_learn_and_end_with_identical_weights(data_dir, data, tmp_path):
    stats_file = str(tmp_path / "stats.json")
    log_dir = tmp_path / "logs"
    args = flags(data_dir=data_dir, epochs=4, batch_size=32, log_dir=log_dir, stats_file=stats_file)
    output = run_horovod(2, args + flags(checkpoint_dir=tmp_path / "checkpoints"))
    stats = read_json(stats_file)
    assert stats["world_size"] == 2
    digests = stats["weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    assert stats["global_step"] == 4 * steps_per_epoch(data, 2, 32)
    assert stats["eval_samples"] == data.num_samples("eval")
    assert stats["eval_accuracy"] > 0.8

    chief = rank_lines(output, 0)
    assert sum(line.startswith("final eval accuracy: ") for line in chief) == 1
    assert any("Epoch 4/4" in line for line in chief)
    assert rank_lines(output, 1) == []  # only rank 0 reports progress
    assert os.listdir(log_dir / "train")  # TensorBoard events, written by rank 0


def test_environment_configures_and_flags_win(data_dir, data, tmp_path):
    stats_file = str(tmp_path / "stats.json")
    completed = run_module(
        "train",
        ["--data-dir", data_dir, "--batch-size", "64"],
        env={
            "TRAINER_EPOCHS": "2",
            "TRAINER_BATCH_SIZE": "16",
            "TRAINER_MODEL": "cnn",
            "TRAINER_STATS_FILE": stats_file,
        },
    )
    assert completed.returncode == 0, completed.stderr
    stats = read_json(stats_file)
    assert (stats["epochs"], stats["batch_size"], stats["model"], stats["world_size"]) == (2, 64, "cnn", 1)
    assert stats["global_step"] == 2 * steps_per_epoch(data, 1, 64)


def test_gradient_accumulation_keeps_the_ranks_in_step(data_dir, data, tmp_path):
    stats_file = str(tmp_path / "stats.json")
    args = flags(data_dir=data_dir, epochs=4, batch_size=32, backward_passes_per_step=2, stats_file=stats_file)
    output = run_horovod(2, args)
    stats = read_json(stats_file)
    assert len(set(stats["weight_digests"])) == 1
    assert stats["eval_accuracy"] > 0.8
    assert "lr 0.001 -> 0.004" in output  # the peak scales with world size x backward passes
