"""The fabric check: nccl-tests v2.19.6 output read into rows, and the verdict on the bus bandwidth at one size.

Samples are written by nccl_tests_samples.py from nccl-tests' own printf formats, plus an excerpt of real output
AWS published. Standard library and pytest only: these run with any Python, without TensorFlow.
"""

# ruff: noqa: E501, W291  (nccl-tests output quoted verbatim)
import os
import select
import subprocess
import sys

import nccl_tests_samples as samples
import pytest
from conftest import TRAINER_DIR

from horovod_trainer import fabric_check
from horovod_trainer.fabric_check import Row, parse, verdict

GIB = samples.GIB
DEFAULT = parse(samples.output())

# Real output, verbatim: AWS's EKS example, two p5.48xlarge (awslabs/awsome-distributed-training 0edaf15,
# micro-benchmarks/nccl-tests/README.md, "Amazon EKS", step 4). An excerpt: no footer.
AWS_EKS_EXCERPT = """\
[1,0]<stdout>:#                                                              out-of-place                       in-place          
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
[1,0]<stdout>:#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
[1,0]<stdout>:           0             0     float     sum      -1    15.51    0.00    0.00      0    15.52    0.00    0.00      0
...
[1,0]<stdout>:    67108864      16777216     float     sum      -1    996.0   67.38  126.33      0   1001.7   66.99  125.62      0
[1,0]<stdout>:   134217728      33554432     float     sum      -1   1950.5   68.81  129.02      0   1725.6   77.78  145.83      0
[1,0]<stdout>:   268435456      67108864     float     sum      -1   3010.8   89.16  167.17      0   3020.7   88.87  166.62      0
[1,0]<stdout>:   536870912     134217728     float     sum      -1   3608.0  148.80  279.00      0   3599.7  149.14  279.64      0
[1,0]<stdout>:  1073741824     268435456     float     sum      -1   6426.3  167.09  313.29      0   6426.1  167.09  313.29      0
[1,0]<stdout>:  2147483648     536870912     float     sum      -1   9197.5  233.49  437.79      0   9195.2  233.54  437.89      0
[1,0]<stdout>:# Out of bounds values : 0 OK
[1,0]<stdout>:# Avg bus bandwidth    : 52.9753
"""


def at(table, size):
    [row] = [row for row in table.rows if row.size == size]
    return row


def test_the_default_layout_gives_every_size_with_both_bandwidths():
    assert DEFAULT.collective == "all_reduce" and DEFAULT.concluded
    assert [row.size for row in DEFAULT.rows] == [8 << i for i in range(31)]  # -b 8 -e 8G -f 2
    assert at(DEFAULT, GIB) == Row(GIB, 76.79, 76.86, 0, 0)


@pytest.mark.parametrize(
    "layout",
    [
        {"cputime": True},  # -C 1: "cputime" instead of "time"
        {"timestamps": True},  # -S 1: a date and a time after the in-place figures
        {"per_iter": True},  # -I 1: i_min i_max i_p99 i_cv% after each half
        {"per_iter": True, "timestamps": True, "cputime": True},
        {"tag": "[1,0]<stdout>:"},  # mpirun --tag-output
        {"tag": "0: "},  # srun --label
        {"tag": " 0: ", "per_iter": True},  # srun --label with 10 or more tasks pads the number
    ],
)
def test_every_layout_gives_the_same_rows(layout):
    table = parse(samples.output(**layout))
    assert table.rows == DEFAULT.rows and table.concluded and table.collective == "all_reduce"


def test_without_result_checks_wrong_is_unknown_not_zero():
    table = parse(samples.output(check=False))  # -c 0 prints N/A
    assert at(table, GIB) == Row(GIB, 76.79, 76.86, None, None)
    assert verdict(table, GIB, 60).passed


def test_figures_too_wide_for_their_column_are_read_in_exponent_notation():
    # getFloatStr: 1234567 GB/s does not fit 6 characters in any fixed notation, so it prints " 1e+06".
    # 1234.567 fits with one decimal, 12345.678 with none.
    rows = [
        (size, 1234567.0, 1234.567) if size == GIB else (size, 12345.678, b) for size, a, b in samples.P4DE_TWO_NODES
    ]
    text = samples.output(rows=rows)
    [line] = [line for line in text.splitlines() if line.startswith(f"  {GIB}")]
    assert " 1e+06" in line and " 1234.6" in line and "  12346" in text
    assert at(parse(text), GIB) == Row(GIB, 1e6, 1234.6, 0, 0)
    assert at(parse(text), 8).out_of_place_busbw == 12346
    wrong = parse(samples.output(wrong={GIB: 2500000}))  # "%6g" of a large count: 2.5e+06
    assert at(wrong, GIB).out_of_place_wrong == 2500000


def test_lines_that_are_not_whole_rows_are_skipped():
    lines = samples.output().splitlines(keepends=True)
    [index] = [i for i, line in enumerate(lines) if line.lstrip().startswith(f"{GIB} ")]
    lines[index] = lines[index][:60] + "fabric-worker-1:47:52 [7] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send]\n"
    table = parse("".join(lines))
    assert GIB not in [row.size for row in table.rows] and len(table.rows) == len(DEFAULT.rows) - 1


def test_rows_before_a_header_are_not_read():
    text = samples.output()
    body = text[text.index("           8  ") :]
    assert parse(body).rows == []


def test_real_output_aws_published():
    table = parse(AWS_EKS_EXCERPT)
    assert [row.size for row in table.rows] == [0, 67108864, 134217728, 268435456, 536870912, GIB, 2 * GIB]
    assert at(table, GIB) == Row(GIB, 313.29, 313.29, 0, 0)
    assert fabric_check.best_busbw(table.rows, 134217728) == 145.83  # the better of the two
    assert not table.concluded


def test_pass_at_or_above_the_floor():
    result = verdict(DEFAULT, GIB, 60, "p4d.24xlarge")
    assert result.passed
    assert result.line == (
        "fabric-check: PASS all_reduce busbw 76.86 GB/s at 1073741824 B >= floor 60 GB/s (p4d.24xlarge)"
    )
    assert verdict(DEFAULT, GIB, 76.86).passed


def test_fail_below_the_floor():
    result = verdict(parse(samples.output(scale=0.4)), GIB, 60, "p4d.24xlarge")
    assert not result.passed
    assert result.line == (
        "fabric-check: FAIL all_reduce busbw 30.74 GB/s at 1073741824 B < floor 60 GB/s (p4d.24xlarge)"
    )
    assert verdict(DEFAULT, GIB, 76.865).line.endswith("< floor 76.865 GB/s")  # the floor as given, every digit


def test_the_better_of_out_of_place_and_in_place_decides():
    rows = [(size, 50.0, 70.0) if size == GIB else (size, a, b) for size, a, b in samples.P4DE_TWO_NODES]
    table = parse(samples.output(rows=rows))
    assert verdict(table, GIB, 60).passed
    assert not verdict(table, GIB, 70.01).passed


def test_fail_when_the_run_ended_before_the_size():
    result = verdict(parse(samples.output(last_size=GIB // 2)), GIB, 60)
    assert not result.passed
    assert result.line == (
        "fabric-check: FAIL all_reduce: no result at 1073741824 B: the run ended before that size "
        "(its last row is 536870912 B)"
    )
    nothing = verdict(parse(samples.output(last_size=GIB // 2).split("#  Rank  3")[0]), GIB, None)
    assert not nothing.passed and nothing.line.endswith("(it printed no result row)")


def test_fail_when_the_run_stopped_after_the_size():
    result = verdict(parse(samples.output(last_size=2 * GIB)), GIB, 60)
    assert not result.passed
    assert result.line.startswith("fabric-check: FAIL all_reduce busbw 76.86 GB/s at 1073741824 B, but the run stopped")


def test_fail_on_wrong_elements_at_any_size():
    result = verdict(parse(samples.output(wrong={4096: 3})), GIB, 60)
    assert not result.passed
    assert result.line == (
        "fabric-check: FAIL all_reduce: 6 wrong element(s) at 4096 B: data corruption on the fabric or a GPU"
    )


def test_without_a_floor_the_measurement_is_reported():
    result = verdict(parse(samples.output(scale=0.4)), GIB, None, "g5.48xlarge")
    assert result.passed
    assert result.line == (
        "fabric-check: MEASURED all_reduce busbw 30.74 GB/s at 1073741824 B (no floor; --floor sets one) (g5.48xlarge)"
    )


def test_the_recorded_outputs_are_what_the_samples_module_writes():
    for name, settings in samples.RECORDINGS.items():
        assert (samples.RECORDED / name).read_text() == samples.output(**settings), name


# --- the command line, as the launcher runs it -------------------------------------------------------------------


def run_check(text, *args, termination_log=None):
    log = ["--termination-log", str(termination_log)] if termination_log else []
    return subprocess.run(
        [sys.executable, "-m", "horovod_trainer.fabric_check", *args, *log],
        input=text,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": TRAINER_DIR},
        timeout=60,
    )


def test_the_command_echoes_the_table_and_ends_with_the_verdict(tmp_path):
    log = tmp_path / "termination-log"
    log.write_text("")
    text = samples.output()
    result = run_check(
        text, "--size", str(GIB), "--floor", "60", "--instance-type", "p4d.24xlarge", termination_log=log
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(text)
    verdict_line = result.stdout[len(text) :]
    assert verdict_line == (
        "fabric-check: PASS all_reduce busbw 76.86 GB/s at 1073741824 B >= floor 60 GB/s (p4d.24xlarge)\n"
    )
    assert log.read_text() == verdict_line


def test_the_command_exits_1_on_a_failure_and_writes_no_log_file_that_is_not_there(tmp_path):
    missing = tmp_path / "no-such-log"
    result = run_check(samples.output(scale=0.4), "--size", str(GIB), "--floor", "60", termination_log=missing)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1].startswith("fabric-check: FAIL all_reduce busbw 30.74 GB/s")
    assert not missing.exists()


@pytest.mark.parametrize("args", [["--size", str(GIB), "--floor", "0"], ["--size", "1G"], ["--floor", "60"]])
def test_the_command_refuses_bad_options(args):
    result = run_check("", *args)
    assert result.returncode == 2 and "fabric_check: error:" in result.stderr


def test_the_command_passes_each_line_on_as_it_arrives():
    process = subprocess.Popen(
        [sys.executable, "-m", "horovod_trainer.fabric_check", "--size", str(GIB)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": TRAINER_DIR},
    )
    try:
        process.stdin.write("# Collective test starting: all_reduce_perf\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready, "the line did not come through before the input ended"
        assert process.stdout.readline() == "# Collective test starting: all_reduce_perf\n"
    finally:
        process.stdin.close()
        process.wait(timeout=30)
    assert process.returncode == 1  # no rows: the run ended before the size
