#!/usr/bin/env python3
"""Write golden vectors for lt::render_op_table() from torch's own table code.

Run it from the repo root with the project's virtualenv (torch 2.15):

    .venv/bin/python tests/unit/gen_op_table_golden.py

For every case it builds torch FunctionEventAvg objects with known numbers (or,
for the "pipeline_*" cases, real FunctionEvents that go through _build_tree()
and key_averages(), the path Lightning's PyTorchProfiler takes), renders them
with torch's EventList.table(sort_by=..., row_limit=...), and writes
tests/unit/data/op_table/:

    cases.txt           one case name a line
    <case>.in           the renderer's input, tab-separated lines:
                          sort_by <TAB> <key, empty for None>
                          row_limit <TAB> <int>
                          with_input_shapes <TAB> 0|1
                          row <TAB> name <TAB> shapes <TAB> self_us <TAB> total_us <TAB> calls
                        rows in the order torch received them; shapes is
                        str(input_shapes) or empty; times are repr(float), so
                        strtod() gets the very same double
    <case>.expected     torch's table text, byte for byte (UTF-8)

The expected text comes from torch, never from our renderer, so the C++ test
checks our reproduction against the real thing.
"""

import os
import random
import sys

import torch
from torch.autograd.profiler_util import EventList, FunctionEvent, FunctionEventAvg

OUT = os.path.join("tests", "unit", "data", "op_table")

# Lightning's PyTorchProfiler sort keys, plus self_cpu_time_total.
SORT_KEYS = [
    "cpu_time",
    "cuda_time",
    "cpu_time_total",
    "cuda_time_total",
    "cpu_memory_usage",
    "cuda_memory_usage",
    "self_cpu_memory_usage",
    "self_cuda_memory_usage",
    "count",
    "self_cpu_time_total",
]


def avg(name, shapes, self_us, total_us, calls):
    """A FunctionEventAvg as key_averages() leaves it for a CPU-only run."""
    e = FunctionEventAvg()
    e.key = name
    e.node_id = -1  # what FunctionEvent carries outside distributed profiling
    e.use_device = None
    e.overload_name = ""
    e.stack = []
    e.is_user_annotation = False
    # key_averages() sets "" when not grouping by shapes, keeps the list otherwise.
    e.input_shapes = "" if shapes is None else shapes
    e.self_cpu_time_total = float(self_us)
    e.cpu_time_total = float(total_us)
    e.count = calls
    return e


# One event of each time range, ties in count and in totals, names around the
# 52-character truncation point (52 and up get "..."), a zero-call row.
BASE = [
    ("aten::add", 120.5, 340.25, 8),
    ("aten::linear", 2500.0, 15300.75, 4),
    ("aten::addmm", 15300.75, 15300.75, 4),
    ("[pl][profile]run_training_epoch", 1200.0, 3250000.5, 1),
    ("aten::copy_", 0.75, 0.75, 8),
    ("x" * 51, 3.0, 9.0, 3),
    ("y" * 52, 3.0, 9.0, 3),
    ("[pl][module]torch.nn.modules.container.Sequential: layer.0.block", 42.125, 999.9996, 2),
    ("aten::empty", 0.0, 0.0, 0),
    ("aten::relu", 999.9996, 1000.0, 7),
]


def base_rows():
    return [avg(n, None, s, t, c) for n, s, t, c in BASE]


def random_rows(seed, n):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        total = round(10 ** rng.uniform(-1, 7), 3)
        self_us = round(total * rng.choice([1.0, rng.random()]), 3)
        calls = rng.choice([1, 2, 4, 8, 16, 100, 1000])
        rows.append(avg(f"aten::op_{i:02d}", None, self_us, total, calls))
    return rows


def shape_rows():
    long_shapes = [[64, 3, 224, 224]] * 6  # str() is over 80 characters: torch cuts it
    return [
        avg("aten::conv2d", [[64, 3, 224, 224], [64, 3, 7, 7], [64], [], [], [], []], 5200.5, 21000.25, 2),
        avg("aten::conv2d", [[8, 3, 32, 32], [64, 3, 7, 7], [64], [], [], [], []], 410.0, 1700.0, 2),
        avg("aten::add", [[2, 3], [2, 3], []], 10.0, 10.0, 4),
        avg("aten::empty", [], 1.5, 1.5, 3),
        avg("aten::cat", [[[1024, 1024]] * 5, []], 800, 900, 1),  # a nested list, as torch records TensorList
        avg("aten::view", long_shapes, 0.5, 0.5, 10),
    ]


def pipeline_events(with_shapes):
    """A small forward pass as the profiler would record it (one thread)."""
    spec = [
        # id, name, start, end, input shapes
        (1, "[pl][profile]training_step", 0.0, 5000.0, []),
        (2, "aten::linear", 10.0, 2010.5, [[32, 64], [128, 64], [128]]),
        (3, "aten::t", 12.0, 20.25, [[128, 64]]),
        (4, "aten::addmm", 21.0, 2000.0, [[128], [32, 64], [64, 128], [], []]),
        (5, "aten::relu", 2020.0, 2100.125, [[32, 128]]),
        (6, "aten::linear", 2110.0, 3110.0, [[32, 128], [10, 128], [10]]),
        (7, "aten::t", 2111.0, 2115.5, [[10, 128]]),
        (8, "aten::addmm", 2116.0, 3100.0, [[10], [32, 128], [128, 10], [], []]),
        (9, "aten::sum", 3200.0, 3250.0, [[32, 10]]),
    ]
    events = [
        FunctionEvent(
            id=i, name=name, thread=1, start_us=s, end_us=e, stack=[], input_shapes=shapes if with_shapes else []
        )
        for i, name, s, e, shapes in spec
    ]
    lst = EventList(events)
    lst._build_tree()
    return lst.key_averages(group_by_input_shapes=with_shapes)


def cases():
    """(name, events, sort_by, row_limit, with_input_shapes)"""
    out = []
    limits = [-1, 3, 20, 5, -1, 3, 1, -1, 3, -1]
    for key, limit in zip(SORT_KEYS, limits):
        out.append((f"base_{key}_{limit}".replace("-1", "all"), base_rows(), key, limit, False))
    out += [
        ("base_cpu_time_total_all", base_rows(), "cpu_time_total", -1, False),
        ("base_count_all", base_rows(), "count", -1, False),
        ("base_cpu_time_3", base_rows(), "cpu_time", 3, False),
        ("base_unsorted_100", base_rows(), None, 100, False),
        ("base_limit0", base_rows(), "cpu_time_total", 0, False),
        ("base_self_xpu_time_total_all", base_rows(), "self_xpu_time_total", -1, False),
        ("random30_cpu_time_total_20", random_rows(7, 30), "cpu_time_total", 20, False),
        ("random30_self_cpu_time_total_all", random_rows(7, 30), "self_cpu_time_total", -1, False),
        ("random12_cpu_time_all", random_rows(11, 12), "cpu_time", -1, False),
        ("shapes_cpu_time_total_all", shape_rows(), "cpu_time_total", -1, True),
        ("shapes_count_3", shape_rows(), "count", 3, True),
        # A short shapes column: torch does not widen it for "Input Shapes".
        ("shapes_short", [avg("aten::neg", [[1]], 2, 2, 1), avg("aten::abs", [[2]], 1, 1, 1)], None, -1, True),
        # Every list empty: torch leaves the column out.
        ("shapes_all_empty", [avg("aten::empty", [], 2, 2, 1), avg("aten::zeros", [], 3, 4, 1)], "count", -1, True),
        ("short_names", [avg("mm", None, 5, 5, 1), avg("bmm", None, 6, 6, 2)], "cpu_time_total", -1, False),
        (
            "unicode_names",
            [
                avg("λ-step", None, 5.0, 7.0, 1),
                avg("[pl][profile]schritt_für_schritt_größe_μs_" + "é" * 20, None, 6.0, 6.5, 2),
                avg("ναι", None, 1.0, 1.0, 1),
            ],
            "cpu_time_total",
            -1,
            False,
        ),
        ("zero_total", [avg("aten::empty", None, 0, 0, 1), avg("aten::size", None, 0, 0, 3)], "count", -1, False),
        (
            "time_boundaries",
            [
                avg("a", None, 999.9994, 999.9995, 1),
                avg("b", None, 999.9996, 999999.9994, 1),
                avg("c", None, 1000.0, 999999.9996, 3),
                avg("d", None, 1e6, 1e6, 3),
                avg("e", None, 123456789.125, 987654321.5, 7),
                avg("f", None, 0.0004, 0.0005, 1),
                avg("g", None, 0.0015, 0.0025, 1),
            ],
            None,
            -1,
            False,
        ),
        ("pipeline_cpu_time_total_all", list(pipeline_events(False)), "cpu_time_total", -1, False),
        ("pipeline_shapes_self_cpu_all", list(pipeline_events(True)), "self_cpu_time_total", -1, True),
        ("pipeline_shapes_cpu_time_3", list(pipeline_events(True)), "cpu_time", 3, True),
    ]
    return out


def row_line(e):
    shapes = "" if e.input_shapes in ("", None) else str(e.input_shapes)
    fields = [e.key, shapes, repr(float(e.self_cpu_time_total)), repr(float(e.cpu_time_total)), str(e.count)]
    for f in fields:
        assert "\t" not in f and "\n" not in f, f
    return "row\t" + "\t".join(fields)


def main():
    os.makedirs(OUT, exist_ok=True)
    names = []
    for name, events, sort_by, row_limit, with_shapes in cases():
        # The pipeline rows carry shapes exactly when grouped by them.
        if not with_shapes:
            assert all(e.input_shapes in ("", None) for e in events), name
        table = EventList(events, use_device=None, profile_memory=False, with_flops=False).table(
            sort_by=sort_by, row_limit=row_limit
        )
        lines = [
            f"# generated by tests/unit/gen_op_table_golden.py from torch {torch.__version__}; do not edit",
            f"sort_by\t{sort_by or ''}",
            f"row_limit\t{row_limit}",
            f"with_input_shapes\t{int(with_shapes)}",
        ] + [row_line(e) for e in events]
        with open(os.path.join(OUT, name + ".in"), "w", encoding="utf-8", newline="") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(OUT, name + ".expected"), "w", encoding="utf-8", newline="") as f:
            f.write(table)
        names.append(name)
    assert len(set(names)) == len(names)
    with open(os.path.join(OUT, "cases.txt"), "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(names) + "\n")
    print(f"wrote {len(names)} cases to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
