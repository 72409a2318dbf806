/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The catalogue of record kinds: one line each, and everything that lists
 * kinds comes from it: the enum lt_event_kind (events.h), the names that
 * loss notes and `dump` print and the size rule the collector checks
 * (user/model/record_kinds.*). Adding a kind: its struct in events.h (and
 * its layout, tests/unit/gen_events_layout.py), one line here, its handler,
 * its test (docs/extending.md).
 *
 *   X(NAME, number, struct, size rule, loss-note name, dump name, keep)
 *
 * Size rule: LT_SIZE_EXACT, the record is exactly sizeof(struct) or the
 * collector drops it (records BPF writes and the normaliser cleans);
 * LT_SIZE_READER, each reader checks it (records with a variable tail,
 * user-space records). Keep: what a window of the stream (watch mode's
 * captures) takes of the kind: LT_KEEP_EVENT, the records whose time is in
 * it; LT_KEEP_NAME, every record from before it too (names and facts later
 * records refer to: code objects, op names, processes, the host);
 * LT_KEEP_SEGMENT, a name that lives with the events of its stretch of the
 * stream (watch's ring segment: a window takes those of every segment it
 * overlaps, whatever their time; the writer names them again in each
 * segment, so the ring does not keep them for ever: PY_LINE, one per sampled
 * instruction); and LT_KEEP_FRAME, none (the window writes its own). Numbers
 * are the trace
 * file's format: never reuse one.
 * Plain C: BPF includes it too.
 */
#ifndef LTRACE_BPF_RECORD_KINDS_H
#define LTRACE_BPF_RECORD_KINDS_H

#define LT_SIZE_READER 0
#define LT_SIZE_EXACT 1

#define LT_KEEP_EVENT 0
#define LT_KEEP_NAME 1
#define LT_KEEP_FRAME 2
#define LT_KEEP_SEGMENT 3

/* clang-format off */
#define LT_RECORD_KINDS(X) \
	/* Lightning actions (pyactions source) */ \
	X(ACTION_BEGIN,      1, lt_action_event,           LT_SIZE_READER, "action start",             "action_begin",      LT_KEEP_EVENT) /* Profiler.profile generator: first resume */ \
	X(ACTION_END,        2, lt_action_event,           LT_SIZE_READER, "action end",               "action_end",        LT_KEEP_EVENT) /* its second resume */ \
	X(DIRECT_START,      3, lt_action_event,           LT_SIZE_READER, "direct start",             "direct_start",      LT_KEEP_EVENT) /* reserved: Profiler.start(name) */ \
	X(DIRECT_STOP,       4, lt_action_event,           LT_SIZE_READER, "direct stop",              "direct_stop",       LT_KEEP_EVENT) /* reserved: Profiler.stop(name) */ \
	X(FETCH_BEGIN,       5, lt_action_event,           LT_SIZE_READER, "dataloader fetch",         "fetch",             LT_KEEP_EVENT) /* next(CombinedLoader): a fetch starts */ \
	X(ACTION_NAME_TAIL,  6, lt_action_name_tail_event, LT_SIZE_READER, "action name piece",        "action_name_tail",  LT_KEEP_EVENT) /* more of the next ACTION_BEGIN's name */ \
	X(ACTION_ORIGIN,     7, lt_action_origin_event,    LT_SIZE_READER, "action opening frame",     "action_origin",     LT_KEEP_EVENT) /* the frame that opened it (sampling) */ \
	X(MODULE_CALL,       8, lt_module_call_event,      LT_SIZE_EXACT,  "module call",              "module_call",       LT_KEEP_EVENT) /* nn.Module._call_impl (--module-names) */ \
	/* process lifecycle (proctrack source) */ \
	X(PROC_FORK,        16, lt_proc_event,             LT_SIZE_EXACT,  "fork",                     "fork",              LT_KEEP_EVENT) \
	X(PROC_EXEC,        17, lt_proc_event,             LT_SIZE_EXACT,  "exec",                     "exec",              LT_KEEP_EVENT) \
	X(PROC_EXIT,        18, lt_proc_event,             LT_SIZE_EXACT,  "exit",                     "exit",              LT_KEEP_EVENT) \
	/* made in user space, never by BPF */ \
	X(PROC_INFO,        32, lt_proc_info_event,        LT_SIZE_READER, "process info",             "proc_info",         LT_KEEP_NAME ) /* pid, rank labels, interpreter */ \
	X(DROPS,            33, lt_drops_event,            LT_SIZE_READER, "drop counters",            "drops",             LT_KEEP_EVENT) /* ring-buffer drops at a point in time */ \
	X(WINDOW,           34, lt_window_event,           LT_SIZE_READER, "window",                   "window",            LT_KEEP_FRAME) /* attach / detach times */ \
	X(HOST_INFO,        35, lt_host_info_event,        LT_SIZE_READER, "host info",                "host_info",         LT_KEEP_NAME ) /* host, kernel, clock reference */ \
	X(PROC_ENV,         36, lt_proc_env_event,         LT_SIZE_READER, "process environment",      "proc_env",          LT_KEEP_NAME ) /* job identity (ranks) */ \
	X(CLOCK_SYNC,       37, lt_clock_sync_event,       LT_SIZE_READER, "clock sync",               "clock_sync",        LT_KEEP_NAME ) /* wall clock vs a reference host */ \
	X(PROC_CONTAINER,   38, lt_proc_container_event,   LT_SIZE_READER, "container",                "proc_container",    LT_KEEP_NAME ) /* namespaces, hostname, id */ \
	X(PROC_DROPS,       39, lt_proc_drops_event,       LT_SIZE_READER, "process losses",           "proc_drops",        LT_KEEP_EVENT) /* what one process lost, by kind and cause */ \
	X(RECORDED_REPORTS, 40, lt_recorded_reports_event, LT_SIZE_READER, "recorded reports",         "recorded_reports",  LT_KEEP_NAME ) /* the reports a recording was made for */ \
	X(STEP_BASE,        41, lt_step_base_event,        LT_SIZE_READER, "step base",                "step_base",         LT_KEEP_FRAME) /* a window's first train step's index in the job */ \
	X(NOTE,             42, lt_note_event,             LT_SIZE_READER, "note",                     "note",              LT_KEEP_NAME ) /* user space: a line the recorder said on stderr */ \
	/* Python stacks (pysample source) */ \
	X(PY_SAMPLE,        48, lt_py_sample_event,        LT_SIZE_EXACT,  "stack sample",             "py_sample",         LT_KEEP_EVENT) /* cpu-clock sample of a target thread */ \
	X(OFFCPU_BEGIN,     49, lt_py_sample_event,        LT_SIZE_EXACT,  "off-CPU",                  "offcpu_begin",      LT_KEEP_EVENT) /* a target thread blocked */ \
	X(OFFCPU_END,       50, lt_offcpu_end_event,       LT_SIZE_READER, "off-CPU",                  "offcpu_end",        LT_KEEP_EVENT) /* it runs again */ \
	/* made in user space: symbols of the stacks above */ \
	X(PY_CODE,          51, lt_py_code_event,          LT_SIZE_READER, "code object",              "py_code",           LT_KEEP_NAME ) /* name, file, first line */ \
	X(PY_LINE,          52, lt_py_line_event,          LT_SIZE_READER, "line",                     "py_line",           LT_KEEP_SEGMENT) /* (code object, instruction) -> line */ \
	X(SAMPLER_INFO,     53, lt_sampler_info_event,     LT_SIZE_READER, "sampler info",             "sampler_info",      LT_KEEP_NAME ) /* rate, period, off-CPU on/off */ \
	X(NATIVE_SYM,       54, lt_native_sym_event,       LT_SIZE_READER, "native symbol",            "native_sym",        LT_KEEP_NAME ) /* native address -> symbol */ \
	X(MODULE_NAME,      55, lt_module_name_event,      LT_SIZE_READER, "module name",              "module_name",       LT_KEEP_NAME ) /* nn.Module -> its name and type */ \
	X(NATIVE_FUNC,      57, lt_native_func_event,      LT_SIZE_READER, "native function",          "native_func",       LT_KEEP_NAME ) /* native address range -> symbol */ \
	/* CPython's garbage collector (pygc source: its USDT probes) */ \
	X(PY_GC,            56, lt_py_gc_event,            LT_SIZE_EXACT,  "garbage collection",       "py_gc",             LT_KEEP_EVENT) /* one collection: generation, its time, objects found */ \
	/* aten operators (opprobe source) */ \
	X(OP,               64, lt_op_event,               LT_SIZE_EXACT,  "op",                       "op",                LT_KEEP_EVENT) /* an at::_ops::<op>::call entry */ \
	X(OP_NAME,          65, lt_op_name_event,          LT_SIZE_READER, "op name",                  "op_name",           LT_KEEP_NAME ) /* user space: op index -> aten name */ \
	X(OP_SHAPES,        66, lt_op_shapes_event,        LT_SIZE_EXACT,  "op",                       "op_shapes",         LT_KEEP_EVENT) /* an op entry with its tensor arguments */ \
	X(REGION_CODE,      67, lt_region_code_event,      LT_SIZE_EXACT,  "compiled region function", "region_code",       LT_KEEP_EVENT) /* a compiled region's entry */ \
	X(COMPILE_NOTE,     68, lt_compile_note_event,     LT_SIZE_READER, "compile note",             "compile_note",      LT_KEEP_EVENT) /* user space: a compile or graph break */ \
	X(OP_SPAN,          69, lt_op_span_event,          LT_SIZE_READER, "op call",                  "op_span",           LT_KEEP_EVENT) /* user space: an op call measured by the op observer in the job */ \
	X(OP_OBSERVER,      70, lt_op_observer_event,      LT_SIZE_READER, "op observer",              "op_observer",       LT_KEEP_NAME ) /* user space: how a process's op times were had */ \
	X(OP_INPUT_SHAPES,  71, lt_op_input_shapes_event,  LT_SIZE_READER, "op input shapes",          "op_input_shapes",   LT_KEEP_NAME ) /* user space: op index -> (op, input shapes) */ \
	/* GPU (the CUPTI/NVTX bridge via USDT; uprobes on libcudart/libcuda) */ \
	X(GPU_ACTIVITY,     80, lt_gpu_activity_event,     LT_SIZE_READER, "GPU activity",             "gpu_activity",      LT_KEEP_EVENT) /* one CUPTI activity record */ \
	X(GPU_NAME,         81, lt_gpu_name_event,         LT_SIZE_READER, "GPU name",                 "gpu_name",          LT_KEEP_NAME ) /* (name id) -> text, in chunks */ \
	X(GPU_LAUNCH,       82, lt_gpu_launch_event,       LT_SIZE_EXACT,  "GPU launch",               "gpu_launch",        LT_KEEP_EVENT) /* a launch / sync / copy API entered */ \
	X(GPU_LAUNCH_STACK, 83, lt_py_sample_event,        LT_SIZE_EXACT,  "GPU launch stack",         "gpu_launch_stack",  LT_KEEP_EVENT) /* the Python stack of that launch */ \
	X(NVTX,             84, lt_nvtx_event,             LT_SIZE_READER, "NVTX",                     "nvtx",              LT_KEEP_EVENT) /* push / pop / start / end / mark */ \
	X(GPU_STATUS,       85, lt_gpu_status_event,       LT_SIZE_EXACT,  "GPU status",               "gpu_status",        LT_KEEP_EVENT) /* the bridge's state */ \
	X(GPU_CLOCK,        86, lt_gpu_clock_event,        LT_SIZE_READER, "GPU clock",                "gpu_clock",         LT_KEEP_NAME ) /* GPU timestamps -> CLOCK_MONOTONIC */ \
	X(DEVICE_STATS,     87, lt_device_stats_event,     LT_SIZE_READER, "device stats",             "device_stats",      LT_KEEP_EVENT) /* user space: NVML sample */ \
	X(PROC_STATS,       88, lt_proc_stats_event,       LT_SIZE_READER, "process stats",            "proc_stats",        LT_KEEP_EVENT) /* user space: /proc CPU and memory */ \
	X(THREAD_SCHED,     89, lt_thread_sched_event,     LT_SIZE_READER, "thread scheduling",        "thread_sched",      LT_KEEP_EVENT) /* user space: a thread's CPU and run-queue time */ \
	X(FORK_STATS,       90, lt_fork_stats_event,       LT_SIZE_READER, "fork stats",               "fork_stats",        LT_KEEP_EVENT) /* user space: an untraced fork's CPU (a DataLoader worker) */ \
	/* memory (memprobe source: torch's allocator hooks) */ \
	X(MEM,              96, lt_mem_event,              LT_SIZE_EXACT,  "memory",                   "mem",               LT_KEEP_EVENT) /* an allocation, a free or an OOM */ \
	X(MEM_STACK,        97, lt_py_sample_event,        LT_SIZE_EXACT,  "memory stack",             "mem_stack",         LT_KEEP_EVENT) /* the Python stack of that MEM */ \
	/* communication (commprobe source: c10d's process-group backends) */ \
	X(COMM,            112, lt_comm_event,             LT_SIZE_EXACT,  "collective",               "comm",              LT_KEEP_EVENT) /* a collective or p2p call entered */ \
	X(COMM_STACK,      113, lt_py_sample_event,        LT_SIZE_EXACT,  "collective stack",         "comm_stack",        LT_KEEP_EVENT) /* its Python stack (--launch-stacks) */ \
	X(COMM_MARK,       114, lt_comm_mark_event,        LT_SIZE_EXACT,  "collective mark",          "comm_mark",         LT_KEEP_EVENT) /* enqueued, done, waited for; DDP buckets */ \
	X(NCCL,            115, lt_nccl_event,             LT_SIZE_EXACT,  "NCCL call",                "nccl",              LT_KEEP_EVENT) /* an NCCL API call entered */ \
	/* XLA (xlaprobe source: torch_xla's PJRT runtime) */ \
	X(XLA,             128, lt_xla_event,              LT_SIZE_EXACT,  "XLA call",                 "xla",               LT_KEEP_EVENT) /* a compile, execution, transfer, step mark or timer end */ \
	X(XLA_METRIC_NAME, 129, lt_xla_metric_name_event,  LT_SIZE_READER, "XLA metric name",          "xla_metric_name",   LT_KEEP_NAME ) /* user space: metric -> torch_xla's name */ \
	X(XLA_INFO,        130, lt_xla_info_event,         LT_SIZE_READER, "XLA info",                 "xla_info",          LT_KEEP_NAME ) /* user space: torch_xla version, PJRT device */ \
	X(XLA_VALUE,       131, lt_xla_value_event,        LT_SIZE_READER, "XLA value",                "xla_value",         LT_KEEP_EVENT) /* user space: a value sample's value (bytes) */
/* clang-format on */

#endif
