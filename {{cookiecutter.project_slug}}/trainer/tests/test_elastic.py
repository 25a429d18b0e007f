"""Elastic mode: a real scale-down from 2 workers to 1 while training goes on."""

from conftest import (
    PROCESS_TIMEOUT,
    flags,
    horovodrun_command,
    kill_group,
    rank_lines,
    read_json,
    start_group,
    wait_for_first_checkpoint,
)

from horovod_trainer.checkpoints import CheckpointStore, Position

EPOCHS = 10  # long enough for the discovery poll (1 s) to see the change before the end


def test_training_continues_when_a_worker_is_removed(data_dir, data, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2\n")
    discover = tmp_path / "discover_hosts.sh"
    discover.write_text(f"#!/bin/sh\ncat {hosts}\n")
    discover.chmod(0o755)
    checkpoint_dir = str(tmp_path / "checkpoints")
    stats_file = str(tmp_path / "stats.json")
    # --network-interface: with one host Horovod cannot probe for common interfaces and would wait.
    launcher = ["--min-np", "1", "--max-np", "2", "--host-discovery-script", str(discover), "--network-interface", "lo"]
    args = flags(data_dir=data_dir, epochs=EPOCHS, elastic=True, checkpoint_dir=checkpoint_dir, stats_file=stats_file)
    command = horovodrun_command(2, args, launcher, local_hosts=False)  # hosts come from discovery
    process = start_group(command)
    try:
        wait_for_first_checkpoint(process, checkpoint_dir)
        hosts.write_text("localhost:1\n")  # the discovery script now offers one slot
        output, _ = process.communicate(timeout=PROCESS_TIMEOUT)
    finally:
        kill_group(process)

    assert process.returncode == 0, output[-4000:]
    chief = rank_lines(output, 0)
    sizes = [line.split()[1] for line in chief if line.startswith("horovod_trainer: ")]
    assert sizes[0] == "2" and sizes[-1] == "1", chief
    stats = read_json(stats_file)
    assert stats["world_size"] == 1 and len(stats["weight_digests"]) == 1
    assert stats["eval_samples"] == data.num_samples("eval")
    assert CheckpointStore(checkpoint_dir).latest().position == Position(EPOCHS)
