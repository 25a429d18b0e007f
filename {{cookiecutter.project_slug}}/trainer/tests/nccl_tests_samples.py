"""nccl-tests all_reduce_perf output as v2.19.6 prints it, for the fabric check's tests.

The lines follow the printf formats of NVIDIA/nccl-tests v2.19.6: src/util.cu writeDeviceReport, writeResultHeader,
writeBenchmarkLinePreamble, writeBenchmarkLineBody (figures through getFloatStr), writePerIterReport,
writeTimestamp and writeResultFooter, and src/common.cu TimeTest (one row per size: preamble, out-of-place body,
in-place body, newline). The bus bandwidths are AWS's published two-node p4de.24xlarge run
(awslabs/awsome-distributed-training 0edaf15, micro-benchmarks/nccl-tests/README.md, "Results", 8 B to 2 GiB);
4 and 8 GiB, beyond that run, continue its curve.

`python nccl_tests_samples.py` rewrites the recorded outputs in nccl_tests_output/, which the repository tool's
tests feed to the rendered nccl-tests job (test_fabric_check.py checks they are what this module writes).
"""

# ruff: noqa: UP031  (printf-style formats, as nccl-tests writes its lines)
from __future__ import annotations

from pathlib import Path

RECORDED = Path(__file__).resolve().parent / "nccl_tests_output"
RANKS = 16  # 2 nodes x 8 GPUs, one GPU per rank (-g 1)
GIB = 1 << 30
# (size in bytes, out-of-place busbw, in-place busbw) in GB/s.
P4DE_TWO_NODES = [
    (8, 0.00, 0.00),
    (16, 0.00, 0.00),
    (32, 0.00, 0.00),
    (64, 0.00, 0.00),
    (128, 0.00, 0.00),
    (256, 0.00, 0.00),
    (512, 0.01, 0.01),
    (1024, 0.01, 0.01),
    (2048, 0.02, 0.02),
    (4096, 0.05, 0.05),
    (8192, 0.09, 0.09),
    (16384, 0.16, 0.16),
    (32768, 0.27, 0.27),
    (65536, 0.54, 0.54),
    (131072, 1.07, 1.08),
    (262144, 2.06, 2.09),
    (524288, 3.78, 3.78),
    (1048576, 6.35, 6.40),
    (2097152, 9.09, 9.90),
    (4194304, 14.73, 14.83),
    (8388608, 20.62, 20.68),
    (16777216, 26.39, 26.42),
    (33554432, 40.85, 40.83),
    (67108864, 47.58, 47.53),
    (134217728, 64.31, 63.99),
    (268435456, 69.89, 69.64),
    (536870912, 74.28, 74.30),
    (1073741824, 76.79, 76.86),
    (2147483648, 78.33, 78.33),
    (4294967296, 78.91, 78.90),
    (8589934592, 79.20, 79.18),
]
TIMESTAMP = "2026-11-26 09:41:07"  # TIME_STRING_FORMAT "%Y-%m-%d %H:%M:%S"


def float_str(value: float, width: int) -> str:
    """getFloatStr: the most decimals that fit the column, then exponent notation, cut to the column."""
    for spec in ("%*.2f", "%*.1f", "%*.0f"):
        text = spec % (width, value)
        if len(text) <= width:
            return text
    return (("%*.1e" if width >= 7 else "%*.0e") % (width, value))[:width]


def _header(cputime: bool, timestamps: bool, per_iter: bool) -> list[str]:
    label, pad, units = ("timestamp", 19, "%Y-%m-%d %H:%M:%S") if timestamps else ("", 0, "")
    time = "cputime" if cputime else "time"
    blank = ("", "", "", "", "")
    if per_iter:
        columns = "# %10s  %12s  %8s  %6s  %6s" + "  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s" * 2 + " %*s\n"
        return [
            "#\n",
            "# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                                "
            "in-place (+ per-iteration)\n" % blank,
            columns
            % ("size", "count", "type", "redop", "root", *((time, "algbw", "busbw", "#wrong", "i_min", "i_max",
               "i_p99", "i_cv%") * 2), pad, label),
            columns
            % ("(B)", "(elements)", "", "", "", *(("(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)") * 2),
               pad, units),
        ]  # fmt: skip
    columns = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n"
    return [
        "#\n",
        "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n" % blank,
        columns
        % ("size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw",
           "#wrong", pad, label),
        columns % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
                   pad, units),
    ]  # fmt: skip


def _body(size: int, busbw: float, wrong: int | None, per_iter: bool) -> str:
    """writeBenchmarkLineBody (all_reduce: busbw = algbw x 2(n-1)/n), then writePerIterReport with -I 1."""
    algbw = busbw * RANKS / (2 * (RANKS - 1))
    time_us = size / (algbw * 1e9) * 1e6 if algbw else 160.0
    text = "  %7s  %6s  %6s" % (float_str(time_us, 7), float_str(algbw, 6), float_str(busbw, 6))
    text += "    N/A" if wrong is None else "  %6g" % wrong
    if per_iter:
        text += "  %7s  %7s  %7s  %7s" % tuple(
            float_str(v, 7) for v in (time_us * 0.97, time_us * 1.08, time_us * 1.07, 2.5)
        )
    return text


def output(
    rows=P4DE_TWO_NODES,
    scale: float = 1.0,
    check: bool = True,
    cputime: bool = False,
    timestamps: bool = False,
    per_iter: bool = False,
    wrong: dict[int, int] | None = None,
    last_size: int | None = None,
    tag: str = "",
) -> str:
    """all_reduce_perf -b 8 -e 8G -f 2 -g 1 on RANKS ranks: busbw times `scale`, #wrong `wrong[size]`, stopping after
    `last_size` (no footer then: the run died), every line behind a launcher's `tag`."""
    wrong = wrong or {}
    lines = [
        "# nccl-tests version 2.19.6 nccl-headers=23007 nccl-library=23007\n",
        "# Collective test starting: all_reduce_perf\n",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 "
        "agg iters: 1 validation: %d graph: 0 unalign: 0\n" % (1 if check else 0),
    ]
    if per_iter:
        lines.append("# Per-Iteration Report: CUDA event timing; i_* uses max over process rows \n")
    lines += ["#\n", "# Using devices\n"]
    for rank in range(RANKS):
        node, device = divmod(rank, 8)
        lines.append(
            "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n"
            % (rank, 0, 40 + device, f"fabric-worker-{node}", device, 0, 0x10 + device, 0x1C, "NVIDIA A100-SXM4-80GB")
        )
    lines.append("fabric-worker-0:40:40 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct\n")
    lines += _header(cputime, timestamps, per_iter)
    total = count = 0
    for size, out_of_place, in_place in rows:
        out_of_place, in_place = out_of_place * scale, in_place * scale
        line = "%12d  %12d  %8s  %6s  %6s" % (size, size // 4, "float", "sum", "%6i" % -1)
        line += _body(size, out_of_place, wrong.get(size, 0) if check else None, per_iter)
        line += _body(size, in_place, wrong.get(size, 0) if check else None, per_iter)
        if timestamps:
            line += "%21s" % TIMESTAMP
        lines.append(line + "\n")
        total, count = total + out_of_place + in_place, count + 2  # BenchTime adds both to the average
        if size == last_size:
            lines.append("fabric-worker-1:47:52 [7] NCCL WARN NET/OFI Request completed with error\n")
            return "".join(tag + line for line in lines)
    errors = 2 * sum(1 for size in wrong if wrong[size])  # CheckData counts each of the two runs of a size
    lines += [
        "# %-20s : %d %s\n" % ("Out of bounds values", errors, "FAILED" if errors else "OK"),
        "# %-20s : %g %s\n" % ("Avg bus bandwidth", total / count, ""),
        "#\n",
        "# Collective test concluded: all_reduce_perf\n",
        "#\n",
        "\n",
    ]
    return "".join(tag + line for line in lines)


# The recorded outputs: a healthy pair, a pair at 40% of it (a node that lost most of its EFA bandwidth), and a run
# that died after 512 MiB.
RECORDINGS = {
    "healthy.txt": {},
    "slow.txt": {"scale": 0.4},
    "ended-early.txt": {"last_size": GIB // 2},
}


def write_recordings() -> None:
    RECORDED.mkdir(exist_ok=True)
    for name, settings in RECORDINGS.items():
        (RECORDED / name).write_text(output(**settings))


if __name__ == "__main__":
    write_recordings()
