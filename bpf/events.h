/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The event model shared by every BPF source and by user space.
 *
 * Every record that crosses the ring buffer (and every record in a trace
 * file) starts with `struct lt_event_header`.  Each kind has one fixed size,
 * stated in the header, so a reader can skip kinds it does not know and a
 * version bump of one kind never breaks the others.
 *
 * This header is included by BPF C (clang -target bpf, with vmlinux.h) and by
 * C++20 user space, so it uses only fixed-width integer types.
 */
#ifndef LTRACE_BPF_EVENTS_H
#define LTRACE_BPF_EVENTS_H

#include "record_kinds.h"

#ifdef __cplusplus
#include <cstdint>
namespace lt
{
using u8 = std::uint8_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;
using s32 = std::int32_t;
using s8 = std::int8_t;
using s64 = std::int64_t;
#endif

/* Bump when any record layout changes; readers refuse newer major versions. */
#define LT_EVENT_ABI_VERSION 2

/* Longest action name carried inline.  Lightning's longest stock names
 * (ModelCheckpoint state keys) are ~150 bytes; the rest of a longer name
 * comes in ACTION_NAME_TAIL records sent just before its ACTION_BEGIN. */
#define LT_NAME_MAX 224

/* Every kind, its struct, size rule and names: record_kinds.h. */
#define LT_EV_ENUM_ENTRY(name, number, ...) LT_EV_##name = number,
enum lt_event_kind {
	LT_EV_NONE = 0, /* no record: in loss counts, a generator resume */
	LT_RECORD_KINDS(LT_EV_ENUM_ENTRY)
};
#undef LT_EV_ENUM_ENTRY

struct lt_event_header {
	u16 kind; /* enum lt_event_kind */
	u16 size; /* total record size in bytes, header included */
	u32 pid;  /* thread group id (process) */
	u32 tid;  /* thread id */
	u32 cpu;
	u64 ts_ns; /* CLOCK_MONOTONIC */
};

/* Flags in lt_action_event.flags */
#define LT_ACT_THROW 0x1u	   /* resumed through gen.throw / throwflag */
#define LT_ACT_NAME_TRUNCATED 0x2u /* name longer than `name` holds: the rest is in ACTION_NAME_TAILs */
#define LT_ACT_NAME_UNREADABLE 0x4u
/* Bits 8-10: the name's str kind when it is not ASCII: 1 = Latin-1,
 * 2 = UCS-2, 4 = UCS-4 code units, little-endian, as CPython stores them
 * (name_len counts code points; name holds the first LT_NAME_MAX bytes). */
#define LT_ACT_NAME_KIND_SHIFT 8
#define LT_ACT_NAME_KIND_MASK 0x700u

/* ACTION_BEGIN / ACTION_END / FETCH_BEGIN (no name) */
struct lt_action_event {
	struct lt_event_header hdr;
	u64 key;      /* generator frame address: pairs BEGIN with END */
	u64 name_ptr; /* address of the action_name str object in the target */
	u32 name_len; /* length in code points (ASCII: bytes) */
	u32 flags;
	char name[LT_NAME_MAX];
};

/* ACTION_NAME_TAIL: a piece of a name longer than lt_action_event.name
 * holds, as the same code units (ASCII bytes, or the kind in the BEGIN's
 * flags), at byte `offset` of the str's data.  BPF sends them in order, on
 * the BEGIN's thread, right before the BEGIN with the same key.  At most
 * LT_NAME_TAILS_MAX: the first ones continue the name; when it is longer
 * than they reach, the last one holds the name's final bytes instead (a
 * gap before it: user space marks the name as cut).  bytes == 0: the piece
 * could not be read. */
#define LT_NAME_TAIL_CHUNK 256
#define LT_NAME_TAILS_MAX 16
struct lt_action_name_tail_event {
	struct lt_event_header hdr;
	u64 key;    /* the ACTION_BEGIN's key */
	u32 offset; /* byte offset of chunk in the name's code units */
	u32 bytes;  /* valid bytes in chunk */
	char chunk[LT_NAME_TAIL_CHUNK];
};

/* ACTION_ORIGIN: right after an ACTION_BEGIN or FETCH_BEGIN of the same
 * thread, when its stacks are sampled: which frame opened the action, so a
 * sample charged to it can keep only the frames below that one (what
 * AdvancedProfiler's cProfile, enabled at the action's start, sees).  For
 * ACTION_BEGIN the opening frame is the caller of contextlib's __enter__
 * (the frame holding the `with`); for FETCH_BEGIN the frame calling
 * next(CombinedLoader).  A record of its own, so older readers skip it and
 * lt_action_event keeps its layout. */
struct lt_action_origin_event {
	struct lt_event_header hdr;
	u64 key;	/* the key of the BEGIN it belongs to */
	u64 code;	/* code object of the opening frame */
	u32 checksum;	/* code_checksum() of it, as in lt_py_frame */
	u32 depth;	/* its 1-based position from the thread's root frame (shim
			 * frames not counted, as the sampler counts); 0 = unknown */
	u16 begin_kind; /* LT_EV_ACTION_BEGIN or LT_EV_FETCH_BEGIN */
	u16 flags;	/* LT_ORIGIN_* */
	u32 pad;
};
#define LT_ORIGIN_TOO_DEEP 0x1u	  /* the walk hit its bound: depth unknown */
#define LT_ORIGIN_READ_FAULT 0x2u /* a frame was unreadable: depth unknown */
#define LT_ORIGIN_NOT_ENTER 0x4u  /* not resumed from a __enter__ frame: no opening frame */

/* MODULE_CALL: a thread entered torch.nn.Module._call_impl (one per
 * module __call__ on every torch version: 2.x's _wrapped_call_impl calls it,
 * 1.13's __call__ is it), sent by the eval-frame probe for targets with
 * LT_TARGET_MODULES (docs/design-modules.md).  No return event: the call
 * runs while a frame of _call_impl stays at `depth` on the thread. */
struct lt_module_call_event {
	struct lt_event_header hdr;
	u64 self;  /* the module (localsplus[0]); MODULE_NAME names it */
	u64 frame; /* its _call_impl frame */
	u64 code;  /* _call_impl's code object */
	u32 depth; /* the frame's 1-based position from the thread's root, as the
		    * sampler counts (shims skipped); 0 = unknown (no thread state,
		    * stack too deep or unreadable) */
	u32 pad;
};

/* PROC_FORK / PROC_EXEC / PROC_EXIT */
struct lt_proc_event {
	struct lt_event_header hdr;
	u32 parent_pid; /* FORK: parent tgid */
	u32 child_pid;	/* FORK: child tgid */
	u32 exit_code;	/* EXIT */
	u32 flags;	/* EXEC: LT_PROC_EXEC_* */
	char comm[16];
};

/* EXEC: the new image is one the holder already found is no CPython
 * (lt_exec_skip): nobody was woken, nobody holds it. */
#define LT_PROC_EXEC_NOT_PYTHON 1u

/* PROC_INFO (user space): who a process is, read from /proc at attach or
 * when it appears.  rank fields are -1 when the variable is unset. */
struct lt_proc_info_event {
	struct lt_event_header hdr;
	u32 ppid;
	s32 rank;
	s32 local_rank;
	s32 world_size;
	u16 py_major;
	u16 py_minor;
	u32 flags; /* LT_PROC_* */
	char comm[16];
	char cmdline[256];	/* argv joined by spaces, truncated */
	char torch_version[24]; /* "" if torch was not loaded yet */
};
#define LT_PROC_PYTHON 0x1u	 /* interpreter found, probes live */
#define LT_PROC_NOT_PYTHON 0x2u	 /* followed, but no CPython in it */
#define LT_PROC_UNSUPPORTED 0x4u /* CPython we cannot read */
/* its children were followed (--children, run, --all): a child missing from
 * the recording did not live while it was recorded */
#define LT_PROC_CHILDREN_FOLLOWED 0x8u

/* PROC_CONTAINER (user space), right after PROC_INFO, only for a process
 * that is not in our own pid, mount and UTS namespaces and root. */
struct lt_proc_container_event {
	struct lt_event_header hdr;
	u32 ns_pid;	       /* its pid inside its own pid namespace */
	u32 flags;	       /* LT_CONTAINER_* */
	char hostname[64];     /* its UTS namespace's */
	char container_id[72]; /* 64 hex from its cgroup path (docker, containerd, cri-o, podman), "" if none */
};
#define LT_CONTAINER_PID_NS 0x1u
#define LT_CONTAINER_MNT_NS 0x2u
#define LT_CONTAINER_UTS_NS 0x4u
#define LT_CONTAINER_CHROOT 0x8u /* same mount namespace, another root */

/* WINDOW (user space): attach (begin=1) and detach (begin=0) times */
struct lt_window_event {
	struct lt_event_header hdr;
	u32 begin;
	u32 pad;
};

/* HOST_INFO (user space): where and when a trace was taken.  The clock pair
 * (CLOCK_MONOTONIC and CLOCK_REALTIME read back to back) maps every ts_ns of
 * this host to wall time, so traces of several hosts can be merged. */
struct lt_host_info_event {
	struct lt_event_header hdr;
	u64 monotonic_ns;
	u64 realtime_ns;
	char hostname[64];
	char host_id[40]; /* /proc/sys/kernel/random/boot_id */
	char kernel[64];  /* uname release */
	char tool[24];	  /* "ltrace-bpf 0.1.0" */
};

/* PROC_ENV (user space): who a process is in a distributed job, read from
 * /proc/PID/environ when it is adopted.  -1 / "" = the variable is unset. */
struct lt_proc_env_event {
	struct lt_event_header hdr;
	s32 rank;	      /* RANK, else SLURM_PROCID, else OMPI_COMM_WORLD_RANK */
	s32 local_rank;	      /* LOCAL_RANK, else SLURM_LOCALID, else OMPI_COMM_WORLD_LOCAL_RANK */
	s32 world_size;	      /* WORLD_SIZE, else SLURM_NTASKS, else OMPI_COMM_WORLD_SIZE */
	s32 local_world_size; /* LOCAL_WORLD_SIZE */
	s32 group_rank;	      /* GROUP_RANK (torchrun: the node's index) */
	s32 slurm_procid;     /* SLURM_PROCID */
	s32 slurm_nodeid;     /* SLURM_NODEID */
	u32 master_port;      /* MASTER_PORT, 0 = unset */
	char slurm_job_id[24];
	char master_addr[64];
	char run_id[64];   /* TORCHELASTIC_RUN_ID */
	char hostname[64]; /* the node, as the process's UTS namespace names it */
};

/* CLOCK_SYNC (user space): this host's CLOCK_REALTIME measured against a
 * reference clock (the `cluster` coordinator's) by UDP round trips, NTP's
 * way: of `samples` exchanges the one with the least delay counts.  The
 * reference's time = this host's + offset_ns, to within +-delay_ns/2
 * (the path delay, less the reference's turnaround, split evenly is the
 * assumption; half of it is the most that assumption can be wrong by).
 * Recorded at attach (phase 0) and at detach (phase 1): the two together
 * also show drift.  hdr.ts_ns is this host's CLOCK_MONOTONIC then. */
struct lt_clock_sync_event {
	struct lt_event_header hdr;
	s64 offset_ns;
	u64 delay_ns;
	u32 samples;
	u32 phase;	    /* 0: at attach, 1: at detach */
	char reference[64]; /* the reference host's name */
};

/* DROPS (user space): totals of lt_drop_counters at detach */
struct lt_drops_event {
	struct lt_event_header hdr;
	u64 ringbuf_full;
	u64 read_faults;
};

/* PROC_DROPS (user space, at detach): records of one kind that one process
 * (hdr.pid; 0: not attributed, the per-process table was full) lost, by
 * cause.  DROPS keeps the totals for older readers. */
struct lt_proc_drops_event {
	struct lt_event_header hdr;
	u16 lost_kind; /* enum lt_event_kind of the records lost; 0: unknown */
	u16 cause;     /* enum lt_loss_cause */
	u32 pad;
	u64 count;
};

/* RECORDED_REPORTS (user space, at attach): the reports the recording was
 * made for (--report, as given or its default), so that `report FILE`
 * prints them when not told otherwise. */
#define LT_REPORTS_MAX 64
struct lt_recorded_reports_event {
	struct lt_event_header hdr;
	char reports[LT_REPORTS_MAX]; /* "simple,advanced,ops", NUL-terminated */
};

/* STEP_BASE (user space, in a window of a longer recording: a watch
 * capture): the job's train step `index` of process hdr.pid (0-based, as
 * the watcher counted them) ran from begin_ns to end_ns, so that the
 * window's reports number its steps as the job does. */
struct lt_step_base_event {
	struct lt_event_header hdr;
	u64 begin_ns;
	u64 end_ns;
	u32 index;
	u32 pad;
};

/* NOTE (user space): one line the recorder said on stderr about the
 * recording (a process it could not trace, a source that failed, how op
 * times were had), written at the detach so that `report FILE` says it
 * too. Cut at LT_NOTE_MAX - 1 bytes; any bytes (printed as UTF-8 text). */
#define LT_NOTE_MAX 480
struct lt_note_event {
	struct lt_event_header hdr;
	char text[LT_NOTE_MAX];
};

/* Deepest Python stack carried by one sample (leaf side kept). */
#define LT_STACK_MAX 96

/* Flags in lt_py_sample_event.flags */
#define LT_SAMPLE_TRUNCATED 0x1u  /* more than LT_STACK_MAX frames */
#define LT_SAMPLE_NO_TSTATE 0x2u  /* the thread has no Python thread state */
#define LT_SAMPLE_READ_FAULT 0x4u /* the walk stopped at unreadable memory */
#define LT_SAMPLE_IN_KERNEL 0x8u  /* the thread was in the kernel (syscall) */
#define LT_SAMPLE_IN_PROBE 0x10u  /* ...handling one of our uprobes: our cost, not the target's */
/* the thread was running CPython's cyclic garbage collector (its
 * interpreter's gc.collecting set, the GIL this thread's): sampled GC
 * time, for CPythons without gc probes (LT_TARGET_GC_SAMPLED) */
#define LT_SAMPLE_IN_GC 0x20u

/* One Python frame: the code object, where in it, and a checksum of the
 * code object (it changes when a freed code object's address is reused). */
struct lt_py_frame {
	u64 code;
	s32 lasti; /* 3.8/3.9: byte offset; 3.10: instruction; 3.11+: code unit */
	u32 checksum;
};

/* Deepest nesting of aten ops tracked per thread (ops calling ops). */
#define LT_OPS_DEPTH 16
/* torch.compile regions (docs/design-compile.md): an op probe whose cookie
 * has LT_OP_COOKIE_REGION set reads the region's annotation ("Torch-Compiled
 * Region: F/C") from its 4th argument and reports op index
 * base + 1 + F * LT_REGION_COMPILES + C (base: the cookie's index, the row for
 * an annotation it cannot parse or out of these bounds). */
#define LT_OP_COOKIE_REGION (1ull << 63)
#define LT_REGION_FRAMES 64
#define LT_REGION_COMPILES 8

/* PY_SAMPLE / OFFCPU_BEGIN: one thread's Python stack, leaf first, and the
 * aten ops running on it (outermost first) when ops are traced. */
struct lt_py_sample_event {
	struct lt_event_header hdr;
	u64 user_ip; /* user-space instruction pointer (native leaf) */
	u64 tstate;  /* PyThreadState of the thread, 0 = none */
	u16 nframes;
	u16 flags;  /* LT_SAMPLE_* */
	u16 nops;   /* entries used in ops[] */
	u16 weight; /* PY_SAMPLE: sampling periods (SAMPLER_INFO's period_ns) it
		     * stands for; 0 (traces before weights, other kinds) = 1 */
	struct lt_py_frame frames[LT_STACK_MAX];
	u32 ops[LT_OPS_DEPTH]; /* op indexes (LT_EV_OP_NAME), outermost first */
};

/* OP: a thread entered at::_ops::<op>::call.  There is no return event (no
 * uretprobe: C++ exceptions through a uretprobe kill the target); an op is
 * known to be running while the thread's stack pointer is below `sp` and
 * its return address is still in place (docs/design-ops.md). */
struct lt_op_event {
	struct lt_event_header hdr;
	u32 op;	   /* index into the session's op table (LT_EV_OP_NAME) */
	u16 depth; /* ops running on this thread, this one included; 0 = deeper than LT_OPS_DEPTH */
	u16 pad;
};

/* REGION_CODE: just before the OP record of a compiled region's entry
 * (docs/design-compile.md), on the same thread: the code object of the frame
 * Dynamo runs the region for (the user's function; PY_CODE names it). */
struct lt_region_code_event {
	struct lt_event_header hdr;
	u32 op;	      /* the region's op index, as in its OP record */
	u32 checksum; /* code_checksum() of code, as in lt_py_frame (0: unreadable) */
	u64 code;     /* f_code / f_executable of the frame */
};

/* COMPILE_NOTE (user space): what torch.compile's Dynamo kept of one
 * compile (its recompile reason, failure, time), or one graph break reason,
 * read from the target's Python objects (user/python/dynamo_state.h).  The
 * ts is when it was read, not when it happened: start_wall_us says that. */
#define LT_COMPILE_ID_MAX 32
#define LT_COMPILE_FUNC_MAX 128
#define LT_COMPILE_FILE_MAX 256
#define LT_COMPILE_REASON_MAX 512
#define LT_COMPILE_FAILURE_MAX 256
struct lt_compile_note_event {
	struct lt_event_header hdr;
	u32 what;	   /* LT_COMPILE_NOTE_* */
	u32 flags;	   /* LT_COMPILE_NOTE_TRUNCATED */
	s64 start_wall_us; /* COMPILE: when it started, CLOCK_REALTIME us; 0 unknown */
	s64 duration_us;   /* COMPILE: how long it took; -1 unknown */
	s64 count;	/* COMPILE: graph breaks in it (-1 unknown); GRAPH_BREAK: times met since the process began */
	s64 first_line; /* COMPILE: co_firstlineno */
	char compile_id[LT_COMPILE_ID_MAX]; /* "0/1" */
	char function[LT_COMPILE_FUNC_MAX]; /* co_name */
	char file[LT_COMPILE_FILE_MAX];	    /* co_filename */
	char reason[LT_COMPILE_REASON_MAX]; /* COMPILE: the guard that failed ("" = first compile); GRAPH_BREAK: why */
	char failure[LT_COMPILE_FAILURE_MAX]; /* COMPILE: "fail_type: fail_reason"; "" = it compiled */
};
#define LT_COMPILE_NOTE_COMPILE 1u
#define LT_COMPILE_NOTE_GRAPH_BREAK 2u
#define LT_COMPILE_NOTE_TRUNCATED 0x1u /* a text cut to fit */

/* OP_SHAPES: an OP with, for each integer argument register (rdi, rsi,
 * rdx, rcx, r8, r9) that points to a dense at::Tensor, words 6..21 of its
 * TensorImpl, where its sizes and strides lie in every torch build we know
 * (user space finds the exact word). */
#define LT_SHAPE_REGS 6
#define LT_SHAPE_FIRST_WORD 6
#define LT_SHAPE_WORDS 16
struct lt_op_shapes_event {
	struct lt_event_header hdr;
	u32 op;
	u16 depth;
	u16 tensors; /* bit i: register i pointed to a tensor; impl[i] holds its words */
	u64 impl[LT_SHAPE_REGS][LT_SHAPE_WORDS];
};

/* MEM: one allocator event, seen by an entry probe (never a return probe:
 * allocations throw).  CPU: c10's ProfiledCPUMemoryReporter::New (ptr and
 * size known at entry) and ::Delete (ptr only: bytes is 0, user space finds
 * the size from the allocation).  CUDA: c10::reportMemoryUsageToProfiler,
 * which the caching allocator calls on every malloc and free with the
 * signed size and its own totals.  `depth` is the number of aten ops running
 * on the thread (as lt_op_event.depth; user space truncates its op stack to
 * it) when LT_MEM_OPS_KNOWN is set (docs/design-memory.md). */
#define LT_MEM_ALLOC 1
#define LT_MEM_FREE 2
#define LT_MEM_OOM 3		 /* an allocation of `bytes` failed */
#define LT_MEM_OPS_KNOWN 0x1u	 /* depth is valid (op probes are on for this process) */
#define LT_MEM_HAS_STACK 0x2u	 /* a MEM_STACK follows on this thread */
#define LT_MEM_TOTALS_KNOWN 0x4u /* total_allocated / total_reserved come from the allocator */
/* Which allocator hook a memprobe uprobe sits on (its attach cookie). */
enum lt_mem_site {
	LT_MEM_SITE_CPU_NEW = 1,      /* ProfiledCPUMemoryReporter::New(this, ptr, nbytes) */
	LT_MEM_SITE_CPU_DELETE = 2,   /* ProfiledCPUMemoryReporter::Delete(this, ptr) */
	LT_MEM_SITE_CPU_OOM = 3,      /* ProfiledCPUMemoryReporter::OutOfMemory(this, nbytes) */
	LT_MEM_SITE_REPORT_USAGE = 4, /* reportMemoryUsageToProfiler(ptr, size, total_alloc, total_res, Device) */
	LT_MEM_SITE_REPORT_OOM = 5,   /* reportOutOfMemoryToProfiler(size, total_alloc, total_res, Device) */
};
/* COMM: a thread entered one of c10d's process-group backend methods
 * (ProcessGroupGloo::allreduce, ...; docs/design-comm.md).  Entry only: no
 * return probe, so no duration.  `pg` is the backend object, `seq` our own
 * count of calls on it in this process since the attach (from 1; counted in
 * BPF, so a record lost to a full ring buffer leaves a gap, not a shift).
 * For calls that carry data, impl[] holds words LT_COMM_FIRST_WORD.. of the
 * TensorImpl of the call's first tensor (this rank's share, see
 * docs/design-comm.md): its sizes, numel and dtype lie there in every torch
 * build we know; user space finds them. */
#define LT_COMM_FIRST_WORD 6
#define LT_COMM_WORDS 24
#define LT_COMM_HAS_TENSOR 0x1u /* impl[] was read */
#define LT_COMM_HAS_STACK 0x2u	/* a COMM_STACK follows on this thread */
/* the call has a tensor, but its words could not be read (a page of the
 * target not present as the probe ran): counted, size not known */
#define LT_COMM_TENSOR_UNREAD 0x4u
enum lt_comm_kind {
	LT_COMM_ALLREDUCE = 1,
	LT_COMM_ALLREDUCE_COALESCED = 2,
	LT_COMM_BROADCAST = 3,
	LT_COMM_REDUCE = 4,
	LT_COMM_ALLGATHER = 5,
	LT_COMM_ALLGATHER_COALESCED = 6,
	LT_COMM_ALLGATHER_INTO_TENSOR = 7, /* _allgather_base (< 2.10), all_gather_single */
	LT_COMM_GATHER = 8,
	LT_COMM_SCATTER = 9,
	LT_COMM_REDUCE_SCATTER = 10,
	LT_COMM_REDUCE_SCATTER_TENSOR = 11, /* reduce_scatter_single */
	LT_COMM_ALLTOALL = 12,
	LT_COMM_ALLTOALL_SINGLE = 13, /* alltoall_base (< 2.10), all_to_all_single */
	LT_COMM_BARRIER = 14,
	LT_COMM_SEND = 15,
	LT_COMM_RECV = 16,
	LT_COMM_RECV_ANYSOURCE = 17,
	LT_COMM_KIND_MAX = 18,
};
enum lt_comm_backend {
	LT_COMM_GLOO = 1,
	LT_COMM_NCCL = 2, /* ProcessGroupNCCL in libtorch_cuda */
};
/* A commprobe uprobe's attach cookie: which call, and where its tensor is. */
#define LT_COMM_COOKIE(kind, backend, reg, form) ((kind) | ((backend) << 8) | ((reg) << 16) | ((form) << 20))
#define LT_COMM_FORM_NONE 0   /* no tensor (barrier) */
#define LT_COMM_FORM_VECTOR 1 /* the register holds std::vector<at::Tensor>& */
#define LT_COMM_FORM_TENSOR 2 /* the register holds at::Tensor& */
struct lt_comm_event {
	struct lt_event_header hdr;
	u64 pg;	 /* the backend object (c10d::ProcessGroupGloo *) */
	u64 seq; /* calls on pg in this process since the attach, this one included */
	u8 kind; /* enum lt_comm_kind */
	u8 backend;
	u16 ntensors; /* tensors in the vector argument (1 for a single tensor, 0 none) */
	s32 peer;     /* send / recv: the peer rank; -1 otherwise */
	u32 flags;    /* LT_COMM_HAS_TENSOR, LT_COMM_HAS_STACK, LT_COMM_TENSOR_UNREAD */
	u32 pad;
	u64 impl[LT_COMM_WORDS];
};

/* COMM_MARK: one point in the life of a c10d collective, from entry probes
 * (docs/design-comm.md, "Times"): ProcessGroupGloo::enqueue (the work is
 * handed to gloo's worker threads: on the issuing thread it follows the
 * collective's COMM), AsyncWork::finishWorkGloo / finishWorkGlooError (the
 * work completed, on a worker thread), Work::wait (a thread starts blocking
 * on a work), and DDP's Reducer: all_reduce_bucket (a gradient bucket's
 * collective is about to be issued on this thread), finalize_backward (the
 * waits for the buckets begin), finalize_bucket_dense (bucket `obj` is
 * complete).  User space joins them (reports/aggregate/comm_times.*). */
enum lt_comm_mark_what {
	LT_COMM_MARK_ENQUEUE = 1,	   /* obj = the AsyncWork, owner = the ProcessGroupGloo */
	LT_COMM_MARK_DONE = 2,		   /* obj = the AsyncWork */
	LT_COMM_MARK_DONE_ERROR = 3,	   /* obj = the AsyncWork */
	LT_COMM_MARK_WAIT = 4,		   /* obj = the Work (any backend's) */
	LT_COMM_MARK_DDP_LAUNCH = 5,	   /* obj = the Reducer::Bucket, owner = the Reducer */
	LT_COMM_MARK_DDP_FINALIZE = 6,	   /* obj = the Reducer */
	LT_COMM_MARK_DDP_BUCKET_READY = 7, /* obj = the Reducer::Bucket, owner = the Reducer */
	LT_COMM_MARK_MAX = 8,
};
struct lt_comm_mark_event {
	struct lt_event_header hdr;
	u64 obj;
	u64 owner; /* 0 where the call has none */
	u8 what;   /* enum lt_comm_mark_what (the probe's attach cookie) */
	u8 pad[7];
};

/* NCCL: a thread entered one of libnccl's API functions (entry probe; NCCL
 * returns error codes, but the probes stay entry-only like every other).
 * The attach cookie is the enum lt_nccl_fn; BPF reads the arguments from
 * the registers and the stack (x86-64 SysV: docs/design-comm.md, "NCCL").
 * COMM_READY is sent by BPF, not by a probe: at the first NCCL entry of a
 * thread after its ncclCommInitRank(Config) once the new communicator's
 * handle is in place (the init wrote it), with that init's nranks and rank. */
enum lt_nccl_fn {
	LT_NCCL_ALLREDUCE = 1,	   /* (send, recv, count, type, op, comm, stream) */
	LT_NCCL_BROADCAST = 2,	   /* (send, recv, count, type, root, comm, stream) */
	LT_NCCL_BCAST = 3,	   /* (buff, count, type, root, comm, stream) */
	LT_NCCL_REDUCE = 4,	   /* (send, recv, count, type, op, root, comm, stream) */
	LT_NCCL_ALLGATHER = 5,	   /* (send, recv, sendcount, type, comm, stream) */
	LT_NCCL_REDUCESCATTER = 6, /* (send, recv, recvcount, type, op, comm, stream) */
	LT_NCCL_ALLTOALL = 7,	   /* (send, recv, count, type, comm, stream): count per peer */
	LT_NCCL_GATHER = 8,	   /* (send, recv, sendcount, type, root, comm, stream) */
	LT_NCCL_SCATTER = 9,	   /* (send, recv, recvcount, type, root, comm, stream) */
	LT_NCCL_SEND = 10,	   /* (send, count, type, peer, comm, stream) */
	LT_NCCL_RECV = 11,	   /* (recv, count, type, peer, comm, stream) */
	LT_NCCL_GROUP_START = 12,  /* () */
	LT_NCCL_GROUP_END = 13,	   /* () */
	LT_NCCL_COMM_INIT = 14, /* ncclCommInitRank(Config)(ncclComm_t *out, nranks, id (in memory), rank[, config]) */
	LT_NCCL_COMM_DESTROY = 15, /* ncclCommDestroy / ncclCommAbort (comm) */
	LT_NCCL_COMM_READY = 16,   /* sent by BPF: comm = the handle an earlier COMM_INIT wrote */
	LT_NCCL_GROUP_SIMULATE_END =
	    17,		     /* ncclGroupSimulateEnd: closes a group that never runs (torch's time estimator) */
	LT_NCCL_SIGNAL = 18, /* ncclPutSignal / ncclSignal / ncclWaitSignal: launch NCCL work; window boundaries */
	LT_NCCL_FN_MAX = 19,
};
struct lt_nccl_event {
	struct lt_event_header hdr;
	u64 comm;   /* ncclComm_t (COMM_INIT: the address the handle is written to) */
	u64 stream; /* cudaStream_t */
	u64 count;  /* elements (per rank share as NCCL's argument says) */
	s32 peer;   /* root (broadcast, reduce, gather, scatter), peer (send, recv), -1 */
	s32 nranks; /* COMM_INIT, COMM_READY: the communicator's size; else -1 */
	s32 rank;   /* COMM_INIT, COMM_READY: this rank in it; else -1 */
	u32 op;	    /* ncclRedOp_t (all_reduce, reduce, reduce_scatter), else 0 */
	u8 fn;	    /* enum lt_nccl_fn */
	u8 dtype;   /* ncclDataType_t (0 int8 ... 9 bfloat16, 10-11 fp8) */
	u8 pad[6];
};

/* ------------------------------------------------------------------ */
/* XLA (xlaprobe source: torch_xla's runtime in its _XLAC extension;
 * docs/design-xla.md).  Entry probes only, as everywhere: the PJRT client's
 * Compile (an uncached compile: torch_xla looked its graph up in its cache
 * first), ExecuteComputation / ExecuteReplicated, TransferToDevice /
 * TransferFromDevice, the graph executor's MarkStep; and the two points
 * where torch_xla's own timers end: metrics::TimedSection's destructor
 * (its metric and its start) and metrics::Metric::AddSample(ts, value), the
 * sample it adds (its metric and its end).  The metrics' clock is
 * CLOCK_REALTIME (sys_util::NowNs: std::chrono::system_clock). */
enum lt_xla_site {
	LT_XLA_COMPILE = 1,	       /* Compile(ret, this, instances) */
	LT_XLA_EXECUTE = 2,	       /* ExecuteComputation(ret, this, computation, args, device, options) */
	LT_XLA_EXECUTE_REPLICATED = 3, /* ExecuteReplicated(ret, this, computation, args, devices, options) */
	LT_XLA_TO_DEVICE = 4,	       /* TransferToDevice(ret, this, Span<tensor sources>) */
	LT_XLA_FROM_DEVICE = 5,	       /* TransferFromDevice(ret, this, Span<data handles>) */
	LT_XLA_MARK_STEP = 6,	       /* XLAGraphExecutor::MarkStep(this, device, reset_scope) */
	LT_XLA_TIMED_END = 7,	       /* metrics::TimedSection::~TimedSection(this) */
	LT_XLA_METRIC_SAMPLE = 8,      /* metrics::Metric::AddSample(this, timestamp_ns, value) */
	LT_XLA_METRIC_VALUE = 9,       /* metrics::Metric::AddSample(this, value): a value sample (bytes) */
};
#define LT_XLA_SITE_MAX 9
struct lt_xla_event {
	struct lt_event_header hdr;
	u64 obj;   /* the client / executor (`this`); TIMED_END: its metric; METRIC_SAMPLE: the metric */
	u64 arg;   /* TO/FROM_DEVICE: tensors moved; TIMED_END: its start, METRIC_SAMPLE: its
		    * timestamp (CLOCK_REALTIME ns); else 0 */
	u32 site;  /* enum lt_xla_site (the probe's attach cookie) */
	u32 flags; /* LT_XLA_UNREAD */
};
#define LT_XLA_UNREAD 0x1u /* TIMED_END: the section could not be read (obj, arg 0) */

/* XLA_METRIC_NAME (user space, before the first record naming the metric):
 * what torch_xla calls metric `metric` of process hdr.pid (Metric::name_,
 * read from the target: "CompileTime", "ExecuteTime", ...). */
#define LT_XLA_METRIC_NAME_MAX 48
struct lt_xla_metric_name_event {
	struct lt_event_header hdr;
	u64 metric;
	char name[LT_XLA_METRIC_NAME_MAX]; /* "" = unreadable */
};

/* XLA_VALUE (user space, right before the METRIC_VALUE it reads): the
 * sample that value probe added, read from the metric's ring of samples in
 * the target (MetricData: count_, then std::vector<{ts, value}>) and found by
 * its time: the transfers' InboundData / OutboundData bytes. */
struct lt_xla_value_event {
	struct lt_event_header hdr; /* pid, tid, ts_ns: the METRIC_VALUE's */
	u64 metric;
	s64 sample_ns; /* its timestamp (CLOCK_REALTIME ns); 0 when not found */
	double value;
	u32 flags; /* LT_XLA_VALUE_* */
	u32 pad;
};
#define LT_XLA_VALUE_NOT_FOUND 0x1u /* unreadable, or no sample at its time (overwritten, another layout) */

/* XLA_INFO (user space, when the probes go on): which torch_xla a process
 * runs and on which PJRT device. */
struct lt_xla_info_event {
	struct lt_event_header hdr;
	char version[32];  /* "2.9.0" ("" unknown: no dist-info or version.py beside it) */
	char device[32];   /* "CPU", "TPU", "CUDA", from PJRT_DEVICE or the PJRT plug-in mapped */
	char library[160]; /* the _XLAC extension's path */
};

struct lt_mem_event {
	struct lt_event_header hdr;
	u64 ptr;
	s64 bytes;	     /* > 0 allocated, < 0 freed (CUDA), 0 = free of unknown size (CPU) */
	u64 total_allocated; /* the allocator's live bytes after this event (LT_MEM_TOTALS_KNOWN) */
	u64 total_reserved;  /* CUDA: bytes the caching allocator holds from the driver */
	u8 what;	     /* LT_MEM_ALLOC / LT_MEM_FREE / LT_MEM_OOM */
	u8 device_type;	     /* c10::DeviceType: 0 CPU, 1 CUDA */
	s8 device_index;     /* -1 for CPU */
	u8 pad;
	u16 depth; /* ops running (LT_MEM_OPS_KNOWN) */
	u16 flags; /* LT_MEM_* flags */
};

/* OP_NAME (user space, pid 0): what an op index means; written before the
 * first record using it. */
#define LT_OP_NAME_MAX 112
#define LT_OP_OVERLOAD_MAX 64
#define LT_OP_ARGS_MAX 40
struct lt_op_name_event {
	struct lt_event_header hdr;
	u32 op;
	u16 nargs; /* schema arguments described in arg_reg (0: unknown) */
	u16 pad;
	char name[LT_OP_NAME_MAX];	   /* "aten::add", as torch.profiler names it */
	char overload[LT_OP_OVERLOAD_MAX]; /* "Tensor"; "" = the default overload */
	s8 arg_reg[LT_OP_ARGS_MAX];	   /* per schema argument: register of a tensor, -1 none */
};

/* OP_SPAN (user space): one op call as the op observer in the job measured
 * it on its thread (a RecordFunction callback, torchbridge/op_observer.cpp;
 * docs/design-op-observer.md).  hdr.ts_ns is its start, hdr.tid its thread. */
struct lt_op_span_event {
	struct lt_event_header hdr;
	u64 end_ns;
	u64 self_ns; /* end - start less the (end - start) of the calls it made */
	u32 op;	     /* op index (LT_EV_OP_NAME) */
	u16 depth;   /* 1 = the outermost call observed on its thread */
	u16 flags;   /* LT_OP_SPAN_* */
};
#define LT_OP_SPAN_HIDDEN 0x1u /* --ops leaves it out (op: none): kept for its callers' nesting */
/* Not a call: no call still to come from this process starts before ts_ns
 * (the op observer's watermark; readers let go of what they kept for earlier). */
#define LT_OP_SPAN_WATERMARK 0x2u
#define LT_OP_SPAN_USER 0x4u /* a record_function() scope: torch.profiler's user annotation */

/* OP_INPUT_SHAPES (user space): op index `op` stands for its op's calls
 * with these input shapes (the op observer's --group-by-input-shapes: one
 * index per (op, shapes) pair, whose OP_NAME is the op's own name).
 * Written after that OP_NAME, before the first call. */
#define LT_OP_SHAPES_TEXT_MAX 1024
struct lt_op_input_shapes_event {
	struct lt_event_header hdr;
	u32 op;
	u32 len;			  /* bytes of text used */
	char text[LT_OP_SHAPES_TEXT_MAX]; /* torch's format: "[[2, 3], []]" */
};

/* OP_OBSERVER (user space): how a process's op times were had.  Written when
 * the choice is made and again at the detach with the final counts. */
#define LT_OP_TIMES_OBSERVER 1 /* measured per call by the op observer */
#define LT_OP_TIMES_SAMPLED 2  /* the observer was not used (detail: why): sampled estimates */
#define LT_OP_OBSERVER_DETAIL_MAX 192
struct lt_op_observer_event {
	struct lt_event_header hdr;
	u32 how;      /* LT_OP_TIMES_* */
	u32 final;    /* 1: the detach's record, with the counts */
	u64 dropped;  /* calls not recorded: a thread's ring was full, or no thread slot was free */
	u64 too_deep; /* calls nested deeper than the observer tracks: not recorded */
	char detail[LT_OP_OBSERVER_DETAIL_MAX];
};

/* OFFCPU_END: hdr.pid/tid is the thread that runs again */
struct lt_offcpu_end_event {
	struct lt_event_header hdr;
	u64 begin_ns; /* its OFFCPU_BEGIN time */
};

/* PY_GC: one garbage collection of CPython's cyclic collector, from its
 * USDT probes python:gc__start and python:gc__done (pygc source; CPythons
 * built with --with-dtrace: Debian's, Ubuntu's, Fedora's).  hdr.ts_ns is
 * its end, on the thread that collected. */
struct lt_py_gc_event {
	struct lt_event_header hdr;
	u64 begin_ns;	/* gc__start */
	s64 collected;	/* gc__done's argument: objects found unreachable (-1: the collection failed) */
	s32 generation; /* 0, 1 or 2 (gc__start's argument) */
	u32 pad;
};

/* PY_CODE (user space): what a code object is.  Keyed by
 * (hdr.pid, code, checksum); written before the first sample using it. */
#define LT_CODE_NAME_MAX 128
#define LT_CODE_FILE_MAX 256
struct lt_py_code_event {
	struct lt_event_header hdr;
	u64 code;
	u32 checksum;
	s32 first_line;
	u32 flags; /* LT_CODE_* */
	u32 pad;
	char name[LT_CODE_NAME_MAX]; /* co_qualname (3.11+) or co_name */
	char file[LT_CODE_FILE_MAX]; /* co_filename */
};
#define LT_CODE_UNREADABLE 0x1u /* the code object could not be read */
/* ...and it was first sampled after its interpreter began to shut down
 * (past the hold at Py_FinalizeEx): finalization frees the code objects
 * that ran in it (threading._shutdown, atexit handlers) before the exit
 * hold's read.  Reports name it <freed at exit>, not <unknown>. */
#define LT_CODE_FREED_AT_EXIT 0x2u

/* PY_LINE (user space): (hdr.pid, code, checksum, lasti) -> line */
struct lt_py_line_event {
	struct lt_event_header hdr;
	u64 code;
	u32 checksum;
	s32 lasti;
	s32 line; /* 0: unknown */
	u32 pad;
};

/* NATIVE_SYM (user space): (hdr.pid, ip) -> symbol */
struct lt_native_sym_event {
	struct lt_event_header hdr;
	u64 ip;
	char name[160]; /* demangled, truncated; "" = unknown */
	char dso[64];	/* base name of the mapped file */
};

/* NATIVE_FUNC (user space): (hdr.pid, every ip in [start, end)) -> symbol:
 * a whole function (or, in a file without symbols there, its mapping),
 * written once for all the addresses sampled in it, so that the names a
 * long recording keeps are bounded by the functions it ran, not by the
 * addresses.  NATIVE_SYM stays for one address. */
struct lt_native_func_event {
	struct lt_event_header hdr;
	u64 start, end;
	char name[160]; /* demangled, truncated; "" = unknown */
	char dso[64];	/* base name of the mapped file */
};

/* MODULE_NAME (user space): a module of the LightningModule's tree, read
 * from the target before the first MODULE_CALL that needs it, named as
 * Lightning's PyTorchProfiler names its `[pl][module]{type}: {name}` rows. */
#define LT_MODULE_TYPE_MAX 128
#define LT_MODULE_PATH_MAX 256
struct lt_module_name_event {
	struct lt_event_header hdr;
	u64 module; /* the module object's address (MODULE_CALL.self) */
	u32 flags;  /* LT_MODULE_NAME_* */
	u32 pad;
	char type[LT_MODULE_TYPE_MAX]; /* type(m).__module__ + "." + __name__, UTF-8 */
	char name[LT_MODULE_PATH_MAX]; /* named_modules() path ("" = the root), UTF-8 */
};
#define LT_MODULE_NAME_TRUNCATED 0x1u /* type or name cut to fit */

/* SAMPLER_INFO (user space, once per session) */
struct lt_sampler_info_event {
	struct lt_event_header hdr;
	u64 period_ns; /* cpu-clock sampling period */
	u32 rate_hz;
	u32 flags; /* LT_SAMPLER_* */
};
#define LT_SAMPLER_ON_CPU 0x1u
#define LT_SAMPLER_OFF_CPU 0x2u
/* samples carry weights (lt_py_sample_event.weight): the cheap tier's each
 * stand for several periods, the escalated ones for one (watch) */
#define LT_SAMPLER_WEIGHTED 0x4u
/* the blocking of the targets' forks only (their DataLoader workers: the
 * verdict's input-bound finding, --report verdict without --off-cpu) */
#define LT_SAMPLER_OFF_CPU_FORKS 0x8u

/* ------------------------------------------------------------------ */
/* GPU.  The bridge library (torchbridge/, loaded into the target by
 * CUDA_INJECTION64_PATH / NVTX_INJECTION64_PATH at launch, or by ptrace
 * injection late) fills the body structs below and hands their address to
 * a USDT probe (provider "ltrace"); the BPF side copies each body into an
 * event after a header.  Bodies are the same bytes in the library, the ring
 * buffer and the trace file. */

/* lt_gpu_activity.kind */
#define LT_GPU_KERNEL 1
#define LT_GPU_MEMCPY 2
#define LT_GPU_MEMSET 3
#define LT_GPU_RUNTIME 4  /* a CUDA runtime API call (cudaLaunchKernel, ...) */
#define LT_GPU_DRIVER 5	  /* a CUDA driver API call not made by the runtime */
#define LT_GPU_SYNC 6	  /* host waited: stream / event / context synchronisation */
#define LT_GPU_OVERHEAD 7 /* CUPTI's own buffer flushes, ... */

/* One CUPTI activity record, times already on CLOCK_MONOTONIC. */
struct lt_gpu_activity {
	u64 start_ns;
	u64 end_ns;
	u64 bytes;	 /* MEMCPY / MEMSET */
	u32 correlation; /* CUPTI correlation id: joins an API call to its kernels */
	u32 name_id;	 /* KERNEL: kernel name (GPU_NAME); RUNTIME/DRIVER: 0 */
	u32 cbid;	 /* RUNTIME / DRIVER: callback id (cupti_runtime_cbid.h) */
	u32 tid;	 /* RUNTIME / DRIVER / SYNC: calling thread (kernel tid) */
	u32 stream;
	u32 context;
	u32 grid[3];
	u32 block[3];
	u32 registers;	/* KERNEL: registers per thread */
	u32 shared_mem; /* KERNEL: static + dynamic shared memory */
	u32 graph_id;	/* KERNEL: CUDA graph, 0 = none */
	u16 kind;	/* LT_GPU_* */
	u16 device;
	u8 copy_kind; /* MEMCPY: CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 8 DtoD, ...) */
	u8 sync_type; /* SYNC: CUpti_ActivitySynchronizationType */
	u16 pad;
	u32 pad2;
};

/* The USDT probe ltrace:activity hands over up to this many at once. */
#define LT_GPU_BATCH 32

struct lt_gpu_activity_event {
	struct lt_event_header hdr; /* pid = target; ts_ns = when BPF copied it */
	struct lt_gpu_activity a;
};

/* lt_gpu_name.kind */
#define LT_NAME_KERNEL 1      /* mangled kernel name, as CUPTI reports it */
#define LT_NAME_NVTX_DOMAIN 2 /* nvtxDomainCreate: id = domain handle id */
#define LT_NAME_NVTX_STRING 3 /* nvtxDomainRegisterString: id = string handle id */
#define LT_NAME_DEVICE 4      /* id = device index: its product name */
#define LT_NAME_RUNTIME_API 5 /* id = runtime cbid: "cudaLaunchKernel" */
#define LT_NAME_DRIVER_API 6  /* id = driver cbid: "cuLaunchKernel" */

/* A name, LT_GPU_NAME_CHUNK bytes at a time; a reader appends chunks of
 * (kind, id) by offset until total_len bytes are in. */
#define LT_GPU_NAME_CHUNK 232
struct lt_gpu_name {
	u32 id;
	u16 kind;      /* LT_NAME_* */
	u16 len;       /* bytes in text[] */
	u32 offset;    /* where text[] starts in the whole name */
	u32 total_len; /* of the whole name */
	char text[LT_GPU_NAME_CHUNK];
};
struct lt_gpu_name_event {
	struct lt_event_header hdr;
	struct lt_gpu_name n;
};

/* lt_gpu_launch_event.source */
#define LT_LAUNCH_CUPTI 1   /* the bridge's CUPTI API-enter callback (correlation exact) */
#define LT_LAUNCH_CUDART 2  /* uprobe on a libcudart entry point (no correlation) */
#define LT_LAUNCH_LIBCUDA 3 /* uprobe on a libcuda entry point (no correlation) */

/* lt_gpu_launch_event.api: what the call does (both sources agree) */
#define LT_API_LAUNCH 1 /* kernel launch */
#define LT_API_SYNC 2	/* waits for the device */
#define LT_API_MEMCPY 3
#define LT_API_MEMSET 4
#define LT_API_OTHER 5
#define LT_API_GRAPH_LAUNCH                                                                                            \
	6 /* a CUDA graph replay (cudaGraphLaunch, cuGraphLaunch): its kernels carry its correlation and a graph id */

/* lt_gpu_launch_event.api of the CUPTI source: LT_API_* | LT_API_DRIVER for a
 * driver call not made by a runtime call (NCCL's and Triton's launches). */
#define LT_API_DRIVER 0x100
#define LT_API_OF(api) ((api)&0xff)

/* GPU_LAUNCH: hdr.pid/tid = the calling thread, at API entry. */
struct lt_gpu_launch_event {
	struct lt_event_header hdr;
	u32 correlation; /* CUPTI source: the correlation id; uprobes: 0 */
	u32 cbid;	 /* CUPTI source: callback id; uprobes: LT_SITE_* of the probed function */
	u64 func;	 /* cudaLaunchKernel: host stub address (names the kernel without CUPTI) */
	u16 source;	 /* LT_LAUNCH_* */
	u16 api;	 /* LT_API_* */
	u16 nops;	 /* aten ops running on the thread (outermost first) */
	u16 flags;	 /* LT_LAUNCH_HAS_STACK: a GPU_LAUNCH_STACK follows */
	u32 ops[LT_OPS_DEPTH];
};
#define LT_LAUNCH_HAS_STACK 0x1u

/* lt_nvtx.type */
#define LT_NVTX_PUSH 1
#define LT_NVTX_POP 2
#define LT_NVTX_START 3 /* nvtxRangeStart: id = range id */
#define LT_NVTX_END 4
#define LT_NVTX_MARK 5

#define LT_NVTX_MSG_MAX 192
struct lt_nvtx {
	u64 ts_ns;     /* CLOCK_MONOTONIC, read in the callback */
	u64 range_id;  /* START / END */
	u32 domain;    /* 0 = default domain, else LT_NAME_NVTX_DOMAIN id */
	u32 string_id; /* registered message: LT_NAME_NVTX_STRING id, else 0 */
	u32 color;     /* ARGB, 0 = none */
	u32 category;
	u32 tid;
	u16 type;    /* LT_NVTX_* */
	u16 msg_len; /* bytes of the whole message (msg holds at most LT_NVTX_MSG_MAX - 1) */
	char msg[LT_NVTX_MSG_MAX];
};
struct lt_nvtx_event {
	struct lt_event_header hdr;
	struct lt_nvtx n;
};

/* lt_gpu_status.state */
#define LT_BRIDGE_ACTIVE 1	/* CUPTI subscribed, activity on */
#define LT_BRIDGE_CUPTI_BUSY 2	/* another CUPTI client holds it (error 39: kineto, Nsight) */
#define LT_BRIDGE_NO_CUPTI 3	/* libcupti could not be loaded */
#define LT_BRIDGE_CUPTI_ERROR 4 /* another CUPTI error (code in `error`) */
#define LT_BRIDGE_DORMANT 5	/* the tracer left: CUPTI released */
#define LT_BRIDGE_NVTX 6	/* NVTX injection initialised for one module */
#define LT_BRIDGE_DROPPED 7	/* CUPTI dropped records (count in `dropped`) */

struct lt_gpu_status {
	u32 state; /* LT_BRIDGE_* */
	s32 error; /* CUptiResult */
	u64 dropped;
	u32 cupti_version;
	u32 flags; /* LT_BRIDGE_F_* */
	char detail[112];
};
#define LT_BRIDGE_F_LATE 0x1u	     /* injected into a running process */
#define LT_BRIDGE_F_TS_CALLBACK 0x2u /* CUPTI timestamps come from our CLOCK_MONOTONIC callback */
struct lt_gpu_status_event {
	struct lt_event_header hdr;
	struct lt_gpu_status s;
};

/* GPU_CLOCK: a pair of readings of the CUPTI clock and CLOCK_MONOTONIC,
 * and the offset the bridge applied (0 with the timestamp callback). */
struct lt_gpu_clock {
	u64 cupti_ns;
	u64 monotonic_ns;
	s64 offset_ns; /* monotonic = cupti + offset */
	u64 error_ns;  /* half the width of the reading window */
};
struct lt_gpu_clock_event {
	struct lt_event_header hdr;
	struct lt_gpu_clock c;
};

/* DEVICE_STATS (user space, NVML): one GPU at one time; ~0 = unknown */
struct lt_device_stats_event {
	struct lt_event_header hdr; /* pid = 0 */
	u32 device;
	u32 gpu_util_pct;   /* utilization.gpu (%) */
	u32 mem_util_pct;   /* utilization.memory (%) */
	u32 temperature_c;  /* temperature.gpu (°C) */
	u64 mem_used_bytes; /* memory.used */
	u64 mem_total_bytes;
	u32 power_mw;
	u32 sm_clock_mhz;
	u64 proc_mem_bytes[4]; /* GPU memory of up to 4 target pids (proc_pid) */
	u32 proc_pid[4];
};

/* PROC_STATS (user space, /proc): one target process at one time */
struct lt_proc_stats_event {
	struct lt_event_header hdr; /* pid = the process */
	u64 cpu_ns;		    /* utime + stime so far */
	u64 rss_bytes;
	u32 vm_percent_x100;   /* cpu_vm_percent * 100 (system, as psutil) */
	u32 swap_percent_x100; /* cpu_swap_percent * 100 */
	u32 cpu_percent_x100;  /* cpu_percent * 100 (system, since the previous sample) */
	u32 flags;	       /* LT_PROC_STATS_* (0 before 2026-12-07) */
};
/* sampled for --report verdict alone (its memory growth and CPU contention
 * findings), not --device-stats: no device-stats report of them */
#define LT_PROC_STATS_FOR_VERDICT 0x1u
/* the sampler looked for this target's forks (FORK_STATS): none written
 * means none ran (num_workers=0), not that none were looked for */
#define LT_PROC_STATS_FORKS_SCANNED 0x2u

/* THREAD_SCHED (user space, /proc/PID/task/TID/schedstat, beside each
 * PROC_STATS): one thread's time on a CPU and time runnable but waiting for
 * one (the run queue), as the scheduler accounts them; the main thread of
 * each target (the training loop's).  ~0 = unreadable. */
struct lt_thread_sched_event {
	struct lt_event_header hdr; /* pid = the process, tid = the thread */
	u64 cpu_ns;		    /* on a CPU so far */
	u64 runq_ns;		    /* waiting on a run queue so far */
	u64 timeslices;
};

/* FORK_STATS (user space, beside each PROC_STATS of a target whose children
 * are not followed: --pid without --children): one fork of the target that
 * is not traced, a DataLoader worker as /proc shows it (a child with no exec
 * since, or a child of its multiprocessing forkserver), so that the
 * verdict's input-bound finding can say who loads the batches.  Its main
 * thread's time on a CPU, as THREAD_SCHED's; ~0 = unreadable. */
struct lt_fork_stats_event {
	struct lt_event_header hdr; /* pid = tid = the fork */
	u32 target;		    /* the target it is a fork of */
	u32 flags;		    /* LT_FORK_STATS_* */
	u64 cpu_ns;		    /* its main thread on a CPU so far */
	u64 rss_bytes;		    /* its resident memory (statm), ~0 unreadable */
};
#define LT_FORK_STATS_VIA_FORKSERVER 0x1u /* a child of the target's forkserver */

/* ------------------------------------------------------------------ */
/* Per-process configuration pushed by user space (map `lt_targets`). */

/* Offsets that differ between CPython minor versions.  0xffff = absent. */
struct lt_py_offsets {
	u16 py_minor;  /* 8 .. 15 */
	u16 gen_frame; /* generator -> frame: pointer field (<=3.10) or embedded (3.11+) */
	u16 gen_frame_embedded;
	u16 frame_code;	 /* f_code / f_executable */
	u16 frame_lasti; /* f_lasti int (<=3.10) or instruction pointer (3.11+) */
	u16 frame_localsplus;
	u16 code_argcount;
	u16 code_flags;
	u16 code_firstlineno;
	u16 code_filename;
	u16 code_name;
	u16 code_firsttraceable; /* 3.11+ */
	u16 code_adaptive;	 /* 3.11+: bytecode start */
	u16 str_ascii_data;	 /* sizeof(PyASCIIObject) */
	u16 eval_frame_arg;	 /* _PyEval_EvalFrameDefault: frame is arg 0 (3.8) or 1 */
	u16 frame_owner;	 /* 3.11+: _PyInterpreterFrame.owner */
	u16 str_compact_data;	 /* sizeof(PyCompactUnicodeObject): non-ASCII data */
	/* Stack walking (pysample) */
	u16 tstate_frame;     /* PyThreadState: frame / cframe / current_frame */
	u16 cframe_frame;     /* _PyCFrame.current_frame (3.11/3.12), 0xffff = none */
	u16 frame_previous;   /* f_back / previous */
	u16 frame_block;      /* bytes of a frame to read at once (covers every field) */
	u8 owner_cstack;      /* 3.12+: frames with owner >= this are not Python's (shims), 0xff = none */
	u8 stackref_tag_mask; /* 3.14+: tag bits of _PyStackRefs (f_executable, localsplus) */
	u8 pad[2];
};

#define LT_TARGET_FOLLOW_CHILDREN 0x1u
#define LT_TARGET_GEN_VIA_EVAL 0x2u   /* resumes come from the eval-frame probe */
#define LT_TARGET_SAMPLE 0x4u	      /* sample its threads' Python stacks */
#define LT_TARGET_OFF_CPU 0x8u	      /* record its threads' blocking */
#define LT_TARGET_OPS 0x10u	      /* trace its aten ops */
#define LT_TARGET_SHAPES 0x20u	      /* ...with their tensor arguments' shapes */
#define LT_TARGET_GPU 0x40u	      /* take its GPU records (bridge USDT, CUDA uprobes) */
#define LT_TARGET_LAUNCH_STACKS 0x80u /* ...and the Python stack of its launches (and c10d calls) */
#define LT_TARGET_TSTATE_MAP 0x100u   /* thread states from lt_tstates, not from fsbase */
#define LT_TARGET_MEM 0x200u	      /* take its allocator events (memprobe) */
#define LT_TARGET_MEM_STACKS 0x400u   /* ...with the Python stack of each */
#define LT_TARGET_COMM 0x800u	      /* take its c10d calls (commprobe) */
#define LT_TARGET_MODULES 0x1000u     /* send its nn.Module calls (MODULE_CALL, eval-frame probe) */
#define LT_TARGET_XLA 0x2000u	      /* take its torch_xla runtime calls (xlaprobe) */
#define LT_TARGET_FORKS_OPS 0x4000u   /* its ops are the op observer's: its forks' entries get OPS | SAMPLE */
#define LT_TARGET_GC 0x8000u	      /* take its garbage collections (pygc) */
/* ACTION_ORIGIN without its depth (the walk stops at the opening frame):
 * stacks are then cut at the outermost frame running its code (watch's
 * cheap tier: a whole-stack walk per action start was most of its cost) */
#define LT_TARGET_ORIGIN_BY_CODE 0x10000u
/* sampled by the full-rate perf events, not the cheap ones (watch's
 * escalation: docs/design-watch.md, "Escalation") */
#define LT_TARGET_SAMPLE_FULL 0x20000u
/* lt_sample's attach cookie: the weight of its samples (low 16 bits), and
 * whether it is the full-rate set (samples LT_TARGET_SAMPLE_FULL targets
 * only; the other set samples only the targets without it) */
#define LT_SAMPLE_COOKIE_FULL (1ull << 16)
/* its GC pauses from its stack samples (LT_SAMPLE_IN_GC): a CPython with
 * neither the gc USDT probes nor invoke_gc_callback (stripped; 3.14+ built
 * without --with-dtrace); the gc_* fields of lt_target say where to look */
#define LT_TARGET_GC_SAMPLED 0x40000u
/* its forks' entries get OFF_CPU (their blocking recorded, its own not:
 * the DataLoader workers' waits for the verdict, LT_SAMPLER_OFF_CPU_FORKS) */
#define LT_TARGET_FORKS_OFF_CPU 0x80000u

struct lt_target {
	struct lt_py_offsets off;
	u32 flags;
	u32 generation; /* bumped on exec so stale cache entries are ignored */
	u64 gen_type;	/* &PyGen_Type in this process */
	/* Written by BPF once Profiler.profile's code object is found: a hit on
	 * it then needs no cache lookup.  Zero from user space. */
	u64 profile_code;
	s32 profile_first_traceable;
	/* pthread_getspecific(tss_key) gives a thread's PyThreadState (glibc
	 * x86-64: a key < 32 lives in fsbase + tsd_block + 16 * key + 8; larger
	 * keys through the second-level array at fsbase + tsd_levels). */
	u32 tss_key;
	u16 tsd_block;
	u16 tsd_levels;
	u32 pad;
	u64 tensor_vtable; /* &vtable(c10::TensorImpl) + 16 in this process (shapes) */
	/* LT_TARGET_GC_SAMPLED: the collector runs while `collecting` (an int)
	 * is set, on the thread holding the GIL.  Absolute addresses where the
	 * state is _PyRuntime's (3.8's gc, <= 3.11's GIL holder), else offsets
	 * in the sampled thread's interpreter (PyThreadState.interp). */
	u64 gc_collecting_at;	  /* 3.8: &_PyRuntime.gc.collecting; else 0 */
	u64 gil_holder_at;	  /* <= 3.11: &_PyRuntime.gilstate.tstate_current; else 0 */
	u16 tstate_interp;	  /* PyThreadState.interp */
	u16 interp_gc_collecting; /* 3.9+: PyInterpreterState.gc.collecting */
	u16 interp_gil_holder;	  /* 3.12+: PyInterpreterState._gil.last_holder (0: no GIL) */
	u16 interp_gil_locked;	  /* 3.12+: ..._gil.locked */
};

/* Classes the BPF side assigns to code and type objects (cached per address). */
enum lt_code_class {
	LT_CODE_OTHER = 0,
	LT_CODE_PROFILE_GEN = 1,     /* code of Profiler.profile */
	LT_TYPE_COMBINED_LOADER = 2, /* type object of Lightning's CombinedLoader */
	LT_CODE_MODULE_CALL = 3,     /* code of torch.nn.Module._call_impl */
};

/* Drop counters (per-CPU array, index 0): totals over every process. */
struct lt_drop_counters {
	u64 ringbuf_full; /* records that found the ring buffer full */
	u64 read_faults;  /* records sent degraded (name or stack unreadable) */
	u64 unreadable;	  /* records not sent: the target memory they describe was unreadable */
};

/* Why a record was lost or degraded (lt_losses, PROC_DROPS). */
enum lt_loss_cause {
	LT_LOSS_RINGBUF_FULL = 1, /* lost: the ring buffer was full */
	LT_LOSS_READ_FAULT = 2,	  /* sent, degraded: a name or stack was unreadable */
	LT_LOSS_UNREADABLE = 3,	  /* lost: what it describes could not be read from the target */
};

/* Key of lt_losses: losses of one process, one record kind, one cause. */
struct lt_loss_key {
	u32 tgid;
	u16 kind;
	u16 cause;
};

/* Every size and offset above, asserted: a moved field fails the build. */
#include "events_layout.h"

#ifdef __cplusplus
} /* namespace lt */
#endif

#endif /* LTRACE_BPF_EVENTS_H */
