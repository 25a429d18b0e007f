"""Pass or fail an nccl-tests run on its bus bandwidth at one message size.

    mpirun ... all_reduce_perf -b 8 -e 8G -f 2 -g 1 \\
        | python -m horovod_trainer.fabric_check --size 1073741824 [--floor GBPS] [--instance-type T]

Every line read is written on to stdout as it arrives (the job's log keeps the table); the last line is the
verdict, and the exit status 1 on a failure:

    fabric-check: PASS all_reduce busbw 436.95 GB/s at 1073741824 B >= floor 250 GB/s (p5.48xlarge)
    fabric-check: FAIL all_reduce busbw 201.20 GB/s at 1073741824 B < floor 250 GB/s (p5.48xlarge)
    fabric-check: MEASURED all_reduce busbw 436.95 GB/s at 1073741824 B (no floor; --floor sets one)

It fails too when any row reports wrong elements (data corruption), when no row has the size (the run ended
before it), and when the run did not finish. The verdict also goes to /dev/termination-log when that file is
there (Kubernetes' default terminationMessagePath), so the pod's status carries it.

The table is read by the names of its header line, as nccl-tests v2.19.6 writes it (src/util.cu,
writeResultHeader, writeBenchmarkLinePreamble, writeBenchmarkLineBody): the default layout, `-c 0` (#wrong N/A),
`-C 1` (cputime), `-S 1` (a timestamp after each row) and `-I 1` (per-iteration columns), with or without a
launcher's per-line prefix (Open MPI's `--tag-output` `[1,0]<stdout>:`, Slurm's `srun -l` `0: `). Standard library
only: it runs in the launcher, and its tests run with any Python.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import re
import sys
from dataclasses import dataclass

TERMINATION_LOG = "/dev/termination-log"
PREFIX = "fabric-check:"
# The columns every result row starts with (writeBenchmarkLinePreamble).
LEADING_COLUMNS = ["size", "count", "type", "redop", "root"]
# writeTimestamp: "%21s" of "%Y-%m-%d %H:%M:%S", two words under the one header name.
TIMESTAMP = "timestamp"
# What writeResultFooter prints last; a run without it stopped before its end.
CONCLUDED = "# Collective test concluded:"
STARTING = "# Collective test starting:"
# Open MPI's --tag-output "[jobid,rank]<stdout>:" and Slurm's srun --label "<task>: ", before the line.
_LAUNCHER_TAG = re.compile(r"^(\[\d+,\d+\]<std(out|err)>:\s?|\s*\d+: )")


@dataclass(frozen=True)
class Row:
    """One message size of the table: bus bandwidths in GB/s, wrong elements (None when not checked, `-c 0`)."""

    size: int
    out_of_place_busbw: float
    in_place_busbw: float
    out_of_place_wrong: int | None
    in_place_wrong: int | None

    @property
    def wrong(self) -> int:
        return sum(w for w in (self.out_of_place_wrong, self.in_place_wrong) if w)


@dataclass(frozen=True)
class Table:
    collective: str  # "all_reduce" of all_reduce_perf; "nccl-tests" when the output does not say
    rows: list[Row]
    concluded: bool  # the footer came: the run reached its end


@dataclass(frozen=True)
class Verdict:
    passed: bool
    line: str


def untagged(line: str) -> str:
    """`line` without a launcher's per-line tag."""
    return _LAUNCHER_TAG.sub("", line, count=1)


def _number(word: str) -> float:
    """A figure as getFloatStr prints it: %.2f, %.1f, %.0f, or %.1e / %.0e when wider than its column."""
    return float(word)


def _wrong(word: str) -> int | None:
    """#wrong: "%6g" of a count (1e+06 once it is large), or N/A when the run does not check results."""
    return None if word == "N/A" else int(float(word))


class _Columns:
    """Where the figures are in a result row, from the header's column names."""

    def __init__(self, names: list[str]):
        busbw = [i for i, name in enumerate(names) if name == "busbw"]
        wrong = [i for i, name in enumerate(names) if name == "#wrong"]
        if len(busbw) != 2 or len(wrong) != 2:
            raise ValueError("not an out-of-place and in-place result header")
        self.busbw, self.wrong = busbw, wrong
        # A row has one word per name, but the timestamp is a date and a time.
        self.words = len(names) + (1 if TIMESTAMP in names else 0)

    def row(self, words: list[str]) -> Row | None:
        if len(words) != self.words or not (words[0].isdigit() and words[1].isdigit()):
            return None
        try:
            return Row(
                int(words[0]),
                _number(words[self.busbw[0]]),
                _number(words[self.busbw[1]]),
                _wrong(words[self.wrong[0]]),
                _wrong(words[self.wrong[1]]),
            )
        except ValueError:
            return None


def _header(line: str) -> _Columns | None:
    if not line.startswith("#"):
        return None
    names = line[1:].split()
    if names[: len(LEADING_COLUMNS)] != LEADING_COLUMNS:
        return None
    try:
        return _Columns(names)
    except ValueError:
        return None


def parse(text: str) -> Table:
    """The result rows of nccl-tests output `text`, in order. Lines that are not rows of the last header seen (NCCL's
    log, a row cut short or interleaved with another process's output) are skipped."""
    collective, rows, concluded, columns = "nccl-tests", [], False, None
    for raw in text.splitlines():
        line = untagged(raw).strip()
        if line.startswith(STARTING):
            collective = line.removeprefix(STARTING).strip().removesuffix("_perf") or collective
        elif line.startswith(CONCLUDED):
            concluded = True
        elif line.startswith("#"):
            columns = _header(line) or columns
        elif columns is not None:
            row = columns.row(line.split())
            if row is not None:
                rows.append(row)
    return Table(collective, rows, concluded)


def best_busbw(rows: list[Row], size: int) -> float | None:
    """The highest bus bandwidth measured at `size`: out-of-place and in-place move the same bytes over the same
    links, so the lower of the two says no more about the fabric than run-to-run noise does; the better one is
    what the links can carry. None when no row has a figure at `size`."""
    figures = [
        value
        for row in rows
        if row.size == size
        for value in (row.out_of_place_busbw, row.in_place_busbw)
        if not math.isnan(value)
    ]
    return max(figures) if figures else None


def _gbps(value: float) -> str:
    return f"{value:.2f}"


def _floor_text(value: float) -> str:
    """The floor as given: 250, 72.5 (not %g's six digits)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def verdict(table: Table, size: int, floor: float | None, instance_type: str | None = None) -> Verdict:
    """Pass or fail `table` on its bus bandwidth at `size` against `floor` GB/s (None: report the measurement)."""
    where = f" ({instance_type})" if instance_type else ""
    name = table.collective
    corrupt = next((row for row in table.rows if row.wrong), None)
    if corrupt is not None:
        return Verdict(
            False,
            f"{PREFIX} FAIL {name}: {corrupt.wrong} wrong element(s) at {corrupt.size} B: data corruption "
            f"on the fabric or a GPU{where}",
        )
    measured = best_busbw(table.rows, size)
    if measured is None:
        last = f"its last row is {table.rows[-1].size} B" if table.rows else "it printed no result row"
        return Verdict(False, f"{PREFIX} FAIL {name}: no result at {size} B: the run ended before that size ({last})")
    figure = f"{name} busbw {_gbps(measured)} GB/s at {size} B"
    if not table.concluded:
        return Verdict(
            False, f"{PREFIX} FAIL {figure}, but the run stopped before its end (no '{CONCLUDED}' line){where}"
        )
    if floor is None:
        return Verdict(True, f"{PREFIX} MEASURED {figure} (no floor; --floor sets one){where}")
    if measured >= floor:
        return Verdict(True, f"{PREFIX} PASS {figure} >= floor {_floor_text(floor)} GB/s{where}")
    return Verdict(False, f"{PREFIX} FAIL {figure} < floor {_floor_text(floor)} GB/s{where}")


# --- command line -------------------------------------------------------------------------------------------------


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def _size(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a message size in bytes")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m horovod_trainer.fabric_check", description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=_size, required=True, help="message size in bytes whose row decides")
    parser.add_argument("--floor", type=_positive, help="least bus bandwidth in GB/s; without it, report only")
    parser.add_argument("--instance-type", help="named in the verdict")
    parser.add_argument(
        "--termination-log",
        default=TERMINATION_LOG,
        help=f"where the verdict goes too, when the file exists and is writable (default {TERMINATION_LOG})",
    )
    return parser


def echo(source, sink) -> str:
    """Copy `source` to `sink` line by line as lines arrive; return all of it."""
    lines = []
    for line in source:
        sink.write(line)
        sink.flush()
        lines.append(line)
    return "".join(lines)


def write_termination_log(path: str, line: str) -> None:
    """Kubernetes reads the file at the container's terminationMessagePath into its terminated state."""
    if os.path.isfile(path) and os.access(path, os.W_OK):
        try:
            with open(path, "w", encoding="utf-8") as log:
                log.write(line + "\n")
        except OSError:
            pass  # the verdict is on stdout and in the exit status either way


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    source = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    text = echo(source, sys.stdout)
    if text and not text.endswith("\n"):
        sys.stdout.write("\n")
    result = verdict(parse(text), args.size, args.floor, args.instance_type)
    print(result.line, flush=True)
    write_termination_log(args.termination_log, result.line)
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
