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
                          device <TAB> cuda         (GPU cases only: the events' use_device)
                          estimated <TAB> 1         (estimated cases only)
                          row <TAB> name <TAB> shapes <TAB> self_us <TAB> total_us <TAB> calls
                              [<TAB> self_device_us <TAB> device_total_us <TAB> 0|1]  (GPU cases)
                        rows in the order torch received them; shapes is
                        str(input_shapes) or empty; times are repr(float), so
                        strtod() gets the very same double; the last GPU field
                        says whether torch adds the row's self device time to
                        "Self CUDA time total" (kernels, memcpy, memset: 1; CPU
                        ops, runtime calls, GPU user annotations: 0)
    <case>.expected     torch's table text, byte for byte (UTF-8)

The expected text comes from torch, never from our renderer, so the C++ test
checks our reproduction against the real thing.  The "gpu_*" cases give torch
events with device times (use_device="cuda"): CPU ops whose kernels ran on the
GPU, runtime calls (cudaLaunchKernel: CPU only), and device-side rows (kernels,
memcpy, memset, a GPU user annotation: CPU columns 0).  torch has no notion of
estimated times, so an "estimated" case is torch's table with our documented
"~" rule applied mechanically (estimate_table below): the five CPU time headers
and the CPU footer get "~", a column whose header outgrows its width is
widened, and the CUDA headers and footer are left alone (device times are
measured).
"""

import os
import random
import re
import sys

import torch
from torch.autograd import DeviceType
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


# --- GPU cases --------------------------------------------------------------

DEVICE_TYPES = (DeviceType.CUDA, DeviceType.PrivateUse1, DeviceType.MTIA, DeviceType.XPU)


def gavg(name, shapes, self_cpu, cpu_total, calls, self_dev, dev_total, kind="cpu"):
    """A FunctionEventAvg as key_averages() leaves it for a CUDA run.

    kind: "cpu" (an op or a runtime call: device time from its kernels),
    "kernel" (a device-side event: kernel, memcpy, memset; CPU times 0) or
    "annotation" (record_function's range on the GPU timeline).
    """
    e = avg(name, shapes, self_cpu, cpu_total, calls)
    e.use_device = "cuda"
    e.device_type = DeviceType.CPU if kind == "cpu" else DeviceType.CUDA
    e.is_user_annotation = kind == "annotation"
    e.self_device_time_total = float(self_dev)
    e.device_time_total = float(dev_total)
    return e


FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
)
CLAMP = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar("
    "at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() "
    "const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::"
    "(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
    "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
    "{lambda(float)#1}, std::array<char*, 2ul>)"
)
SGEMM = "ampere_sgemm_64x32_sliced1x4_tn"

# A training step: ops with their kernels' time, the runtime calls, the kernels,
# a memcpy and a memset, and the step's range on the GPU (a user annotation:
# shown, but left out of "Self CUDA time total").
GPU_BASE = [
    ("[pl][profile]run_training_batch", 850.25, 48210.5, 4, 0.0, 8770.75, "cpu"),
    ("[pl][profile]run_training_batch", 0.0, 0.0, 4, 31000.5, 31000.5, "annotation"),
    ("aten::linear", 310.5, 9800.125, 12, 0.0, 6120.0, "cpu"),
    ("aten::addmm", 1450.75, 6210.0, 12, 6120.0, 6120.0, "cpu"),
    ("aten::relu", 95.0, 310.0, 8, 0.0, 220.5, "cpu"),
    ("aten::clamp_min", 120.0, 215.0, 8, 220.5, 220.5, "cpu"),
    ("aten::to", 12.0, 2650.0, 4, 0.0, 2410.25, "cpu"),
    ("aten::copy_", 40.0, 2600.0, 4, 2410.25, 2410.25, "cpu"),
    ("aten::zero_", 22.0, 60.0, 6, 0.0, 18.5, "cpu"),
    ("aten::fill_", 38.0, 38.0, 6, 18.5, 18.5, "cpu"),
    ("aten::zeros", 8.5, 70.5, 2, 1.5, 1.5, "cpu"),
    ("aten::empty", 30.0, 30.0, 20, 0.0, 0.0, "cpu"),
    ("cudaLaunchKernel", 4200.5, 4200.5, 38, 0.0, 0.0, "cpu"),
    ("cudaMemcpyAsync", 2380.0, 2380.0, 4, 0.0, 0.0, "cpu"),
    ("cudaMemsetAsync", 6.25, 6.25, 2, 0.0, 0.0, "cpu"),
    ("cudaDeviceSynchronize", 1500000.0, 1500000.0, 1, 0.0, 0.0, "cpu"),
    (SGEMM, 0.0, 0.0, 12, 6120.0, 6120.0, "kernel"),
    (CLAMP, 0.0, 0.0, 8, 220.5, 220.5, "kernel"),
    ("Memcpy HtoD (Pageable -> Device)", 0.0, 0.0, 4, 2410.25, 2410.25, "kernel"),
    (FILL, 0.0, 0.0, 6, 18.5, 18.5, "kernel"),
    ("Memset (Device)", 0.0, 0.0, 2, 1.5, 1.5, "kernel"),
]


def gpu_rows():
    return [gavg(n, None, sc, ct, c, sd, dt, k) for n, sc, ct, c, sd, dt, k in GPU_BASE]


def gpu_shape_rows():
    return [
        gavg("aten::addmm", [[128], [32, 64], [64, 128], [], []], 1200.5, 5000.0, 8, 4100.0, 4100.0),
        gavg("aten::addmm", [[10], [32, 128], [128, 10], [], []], 250.25, 1210.0, 4, 2020.0, 2020.0),
        gavg("aten::copy_", [[32, 64], [32, 64], []], 40.0, 2600.0, 4, 2410.25, 2410.25),
        gavg("cudaLaunchKernel", [], 4200.5, 4200.5, 38, 0.0, 0.0),
        gavg(SGEMM, [], 0.0, 0.0, 12, 6120.0, 6120.0, "kernel"),
        gavg("Memcpy HtoD (Pageable -> Device)", [], 0.0, 0.0, 4, 2410.25, 2410.25, "kernel"),
    ]


def gpu_random_rows(seed, n):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        kind = rng.choice(["cpu", "cpu", "kernel"])
        dev = round(10 ** rng.uniform(-1, 6.5), 3)
        if kind == "kernel":
            rows.append(gavg(f"kernel_{i:02d}", None, 0.0, 0.0, rng.choice([1, 3, 7, 100]), dev, dev, "kernel"))
        else:
            total = round(10 ** rng.uniform(-1, 6), 3)
            self_cpu = round(total * rng.random(), 3)
            self_dev = rng.choice([0.0, dev, round(dev * rng.random(), 3)])
            rows.append(gavg(f"aten::op_{i:02d}", None, self_cpu, total, rng.choice([1, 2, 8, 1000]), self_dev, dev))
    return rows


def gpu_time_rows():
    return [
        gavg("a", None, 1.0, 1.0, 1, 999.9994, 999.9995),
        gavg("k1", None, 0.0, 0.0, 1, 999.9996, 999999.9994, "kernel"),
        gavg("k2", None, 0.0, 0.0, 3, 1000.0, 999999.9996, "kernel"),
        gavg("k3", None, 0.0, 0.0, 3, 1e6, 1e6, "kernel"),
        gavg("k4", None, 0.0, 0.0, 7, 123456789.125, 987654321.5, "kernel"),
        gavg("b", None, 2.0, 3.0, 1, 0.0004, 0.0005),
        gavg("k5", None, 0.0, 0.0, 0, 0.0015, 0.0025, "kernel"),
    ]


def gpu_pipeline_events(with_shapes):
    """A forward pass as kineto would hand it to torch: CPU ops with their
    runtime calls nested inside, the kernels appended to the op that launched
    them, device-side events on a stream, and the step's GPU annotation."""
    cpu = [
        # id, name, start, end, input shapes, kernels [(name, duration)]
        (1, "[pl][profile]training_step", 0.0, 5000.0, [], []),
        (2, "aten::linear", 10.0, 2010.5, [[32, 64], [128, 64], [128]], []),
        (3, "aten::t", 12.0, 20.25, [[128, 64]], []),
        (4, "aten::addmm", 21.0, 2000.0, [[128], [32, 64], [64, 128], [], []], [(SGEMM, 1510.5)]),
        (5, "cudaLaunchKernel", 30.0, 1990.0, [], []),
        (6, "aten::relu", 2020.0, 2100.125, [[32, 128]], []),
        (7, "aten::clamp_min", 2021.0, 2099.0, [[32, 128], []], [(CLAMP, 12.375)]),
        (8, "cudaLaunchKernel", 2030.0, 2035.5, [], []),
        (9, "aten::linear", 2110.0, 3110.0, [[32, 128], [10, 128], [10]], []),
        (10, "aten::t", 2111.0, 2115.5, [[10, 128]], []),
        (11, "aten::addmm", 2116.0, 3100.0, [[10], [32, 128], [128, 10], [], []], [(SGEMM, 410.25)]),
        (12, "cudaLaunchKernel", 2120.0, 2128.75, [], []),
        (13, "aten::to", 3200.0, 4200.0, [[32, 10], [], [], [], [], []], []),
        (14, "aten::copy_", 3201.0, 4199.0, [[32, 10], [32, 10], []], [("Memcpy DtoH (Device -> Pinned)", 3.5)]),
        (15, "cudaMemcpyAsync", 3210.0, 3215.25, [], []),
        (16, "cudaStreamSynchronize", 3216.0, 4190.0, [], []),
    ]
    events = []
    for i, name, s, e, shapes, kernels in cpu:
        fe = FunctionEvent(
            id=i, name=name, thread=1, start_us=s, end_us=e, stack=[], use_device="cuda",
            input_shapes=shapes if with_shapes else [],
        )
        for kname, dur in kernels:
            fe.append_kernel(kname, 0, dur)
        events.append(fe)
    gpu = [
        (101, SGEMM, 100.0, 1610.5),
        (102, CLAMP, 2040.0, 2052.375),
        (103, SGEMM, 2130.0, 2540.25),
        (104, "Memcpy DtoH (Device -> Pinned)", 4180.0, 4183.5),
        (105, "[pl][profile]training_step", 90.0, 4185.0),
    ]
    for i, name, s, e in gpu:
        events.append(
            FunctionEvent(
                id=i, name=name, thread=7, start_us=s, end_us=e, stack=[], use_device="cuda",
                input_shapes=[], device_type=DeviceType.CUDA, is_user_annotation=name.startswith("[pl]"),
            )
        )
    lst = EventList(events, use_device="cuda")
    lst._build_tree()
    return lst.key_averages(group_by_input_shapes=with_shapes)


def gpu_cases():
    """(name, events, sort_by, row_limit, with_input_shapes, use_device, estimated)"""
    cu = "cuda"
    return [
        ("gpu_cuda_time_total_all", gpu_rows(), "cuda_time_total", -1, False, cu, False),
        ("gpu_self_cuda_time_total_all", gpu_rows(), "self_cuda_time_total", -1, False, cu, False),
        ("gpu_self_cuda_time_total_3", gpu_rows(), "self_cuda_time_total", 3, False, cu, False),
        ("gpu_cuda_time_5", gpu_rows(), "cuda_time", 5, False, cu, False),
        ("gpu_cuda_time_all", gpu_rows(), "cuda_time", -1, False, cu, False),
        ("gpu_cpu_time_total_all", gpu_rows(), "cpu_time_total", -1, False, cu, False),
        ("gpu_cpu_time_total_20", gpu_rows(), "cpu_time_total", 20, False, cu, False),
        ("gpu_self_cpu_time_total_10", gpu_rows(), "self_cpu_time_total", 10, False, cu, False),
        ("gpu_count_all", gpu_rows(), "count", -1, False, cu, False),
        ("gpu_unsorted_100", gpu_rows(), None, 100, False, cu, False),
        ("gpu_limit0", gpu_rows(), "cuda_time_total", 0, False, cu, False),
        ("gpu_cuda_memory_usage_all", gpu_rows(), "cuda_memory_usage", -1, False, cu, False),
        ("gpu_estimated_self_cuda_time_total_all", gpu_rows(), "self_cuda_time_total", -1, False, cu, True),
        ("gpu_estimated_cpu_time_total_5", gpu_rows(), "cpu_time_total", 5, False, cu, True),
        ("gpu_shapes_cuda_time_total_all", gpu_shape_rows(), "cuda_time_total", -1, True, cu, False),
        ("gpu_shapes_self_cuda_time_total_2", gpu_shape_rows(), "self_cuda_time_total", 2, True, cu, False),
        ("gpu_shapes_estimated_cuda_time_all", gpu_shape_rows(), "cuda_time", -1, True, cu, True),
        ("gpu_random30_self_cuda_time_total_20", gpu_random_rows(3, 30), "self_cuda_time_total", 20, False, cu, False),
        ("gpu_random30_cuda_time_total_all", gpu_random_rows(3, 30), "cuda_time_total", -1, False, cu, False),
        ("gpu_random12_cuda_time_all", gpu_random_rows(5, 12), "cuda_time", -1, False, cu, False),
        ("gpu_time_boundaries", gpu_time_rows(), None, -1, False, cu, False),
        # Device time but no self device time: torch shows no device columns,
        # yet sorts by the device totals.
        (
            "gpu_no_self_device_time",
            [
                gavg("aten::mm", None, 5.0, 9.0, 1, 0.0, 3.0),
                gavg("aten::matmul", None, 4.0, 13.0, 1, 0.0, 7.0),
                gavg("aten::t", None, 2.0, 2.0, 2, 0.0, 0.0),
            ],
            "cuda_time_total",
            -1,
            False,
            cu,
            False,
        ),
        ("gpu_pipeline_cuda_time_total_all", list(gpu_pipeline_events(False)), "cuda_time_total", -1, False, cu, False),
        ("gpu_pipeline_cpu_time_total_all", list(gpu_pipeline_events(False)), "cpu_time_total", -1, False, cu, False),
        ("gpu_pipeline_shapes_self_cuda_all", list(gpu_pipeline_events(True)), "self_cuda_time_total", -1, True, cu,
         False),
        ("gpu_pipeline_estimated_cuda_time_4", list(gpu_pipeline_events(False)), "cuda_time", 4, False, cu, True),
        ("gpu_pipeline_shapes_estimated_self_cpu_all", list(gpu_pipeline_events(True)), "self_cpu_time_total", -1,
         True, cu, True),
    ]


ESTIMATED_HEADERS = ("Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg")


def estimate_table(table):
    """torch's table text with our "~" rule for sampled CPU times applied.

    Columns come from the first dashes line; the header line is split at runs of
    two or more spaces (no torch header holds two), rows are cut at the column
    positions (checked: a value that overflows its column would be refused).
    """
    lines = table.split("\n")
    sep = lines[0]
    assert set(sep) <= {"-", " "} and sep.endswith("  "), sep
    widths = [len(d) for d in sep.split("  ")[:-1]]
    headers = re.split(r" {2,}", lines[1].strip())
    assert len(headers) == len(widths), headers
    new_headers = [h + "~" if h in ESTIMATED_HEADERS else h for h in headers]
    new_widths = [max(w, len(nh)) if nh != h else w for w, h, nh in zip(widths, headers, new_headers)]

    def cells_of(line):
        out, pos = [], 0
        for w in widths:
            out.append(line[pos : pos + w])
            assert line[pos + w : pos + w + 2] == "  ", (line, pos, w)
            pos += w + 2
        assert pos == len(line), line
        return out

    def fmt(cells):
        return "".join(c.rjust(w) + "  " for c, w in zip(cells, new_widths))

    out = []
    for i, line in enumerate(lines):
        if line == sep:
            out.append("".join("-" * w + "  " for w in new_widths))
        elif i == 1:
            out.append(fmt(new_headers))
        elif line.startswith("Self CPU time total: "):
            out.append(line.replace("Self CPU time total: ", "Self CPU time total~: ", 1))
        elif line.startswith("Self ") and " time total: " in line or line == "":
            out.append(line)
        else:
            out.append(fmt([c.strip() if j else c.lstrip() for j, c in enumerate(cells_of(line))]))
    return "\n".join(out)


def row_line(e, gpu):
    shapes = "" if e.input_shapes in ("", None) else str(e.input_shapes)
    fields = [e.key, shapes, repr(float(e.self_cpu_time_total)), repr(float(e.cpu_time_total)), str(e.count)]
    if gpu:
        # _build_table's condition for adding a row to "Self CUDA time total".
        on_device = (e.device_type == DeviceType.CPU and e.is_legacy) or (
            e.device_type in DEVICE_TYPES and not e.is_user_annotation
        )
        fields += [repr(float(e.self_device_time_total)), repr(float(e.device_time_total)), str(int(on_device))]
    for f in fields:
        assert "\t" not in f and "\n" not in f, f
    return "row\t" + "\t".join(fields)


def main():
    os.makedirs(OUT, exist_ok=True)
    names = []
    all_cases = [c + (None, False) for c in cases()] + gpu_cases()
    for name, events, sort_by, row_limit, with_shapes, use_device, estimated in all_cases:
        # The pipeline rows carry shapes exactly when grouped by them.
        if not with_shapes:
            assert all(e.input_shapes in ("", None) for e in events), name
        assert all(e.use_device == use_device for e in events), name
        table = EventList(events, use_device=use_device, profile_memory=False, with_flops=False).table(
            sort_by=sort_by, row_limit=row_limit
        )
        if estimated:
            table = estimate_table(table)
        lines = [
            f"# generated by tests/unit/gen_op_table_golden.py from torch {torch.__version__}; do not edit",
            f"sort_by\t{sort_by or ''}",
            f"row_limit\t{row_limit}",
            f"with_input_shapes\t{int(with_shapes)}",
        ]
        if use_device:
            lines.append(f"device\t{use_device}")
        if estimated:
            lines.append("estimated\t1")
        lines += [row_line(e, use_device is not None) for e in events]
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
