/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The memory the bridge's op observer (torchbridge/op_observer.cpp) shares
 * with ltrace-bpf (user/collector/op_observer.cpp): not a BPF map, a memfd
 * the bridge makes in the job ("ltrace-ops") and the tracer maps through
 * /proc/PID/fd/N.  No trap and no syscall per op: the observer's
 * RecordFunction callbacks write spans into their thread's ring, the tracer
 * reads them between two drains (docs/design-op-observer.md).
 *
 *   header | slots[LT_OBS_SLOTS] | name index[LT_OBS_NAMES] | name bytes |
 *   rings[LT_OBS_SLOTS][LT_OBS_RING]
 *
 * Handshake: the tracer raises ltrace:ops's semaphore; the bridge's poll
 * thread makes the buffer (state WAITING), sealed against resizing; the
 * tracer claims it (reader_pid), writes the callback layout of the job's
 * torch and bumps `request`; the bridge registers its callback and answers
 * (detail, then state, then `answered`: ACTIVE, or REFUSED with a reason).
 * When the semaphore falls (the tracer detached or died) the bridge
 * removes its callback (state OFF).  Each side keeps its own copy of where
 * things are and treats what the other writes as untrusted.
 */
#ifndef LTRACE_BPF_OPOBSERVER_SHM_H
#define LTRACE_BPF_OPOBSERVER_SHM_H

#include "events.h"

#ifdef __cplusplus
namespace lt
{
#endif

#define LT_OBS_MAGIC 0x424f544cu /* "LTOB" */
#define LT_OBS_VERSION 3
#define LT_OBS_MEMFD_NAME "ltrace-ops"
#define LT_OBS_SLOTS 64	   /* threads recording at once */
#define LT_OBS_RING 131072 /* spans per thread, a power of two (4 MiB): 100 ms of a 1.2 M-op/s thread */
#define LT_OBS_NAMES 65536 /* distinct op names */
#define LT_OBS_NAME_BYTES (4u << 20)
#define LT_OBS_CALLBACK_MAX 128 /* bytes of at::RecordFunctionCallback the bridge can lay out */
#define LT_OBS_DEPTH 64		/* nesting tracked per thread */

/* Where everything is: fixed, so that neither side takes an offset from the
 * other (each checks the header against these). */
#define LT_OBS_SLOT_BYTES 128
#define LT_OBS_SPAN_BYTES 32
#define LT_OBS_SLOTS_OFFSET 4096ull
#define LT_OBS_INDEX_OFFSET (LT_OBS_SLOTS_OFFSET + (unsigned long long)LT_OBS_SLOT_BYTES * LT_OBS_SLOTS)
#define LT_OBS_NAMES_OFFSET (LT_OBS_INDEX_OFFSET + 4ull * LT_OBS_NAMES)
#define LT_OBS_RINGS_OFFSET (LT_OBS_NAMES_OFFSET + (unsigned long long)LT_OBS_NAME_BYTES)
#define LT_OBS_SIZE (LT_OBS_RINGS_OFFSET + (unsigned long long)LT_OBS_SPAN_BYTES * LT_OBS_RING * LT_OBS_SLOTS)

enum lt_obs_state {
	LT_OBS_WAITING = 1, /* buffer made; no layout yet */
	LT_OBS_ACTIVE = 2,  /* the callback is registered */
	LT_OBS_REFUSED = 3, /* the layout or torch's symbols did not fit: detail says why */
	LT_OBS_OFF = 4,	    /* the callback was removed (the tracer left) */
};

/* at::RecordFunctionCallback as the job's torch lays it out (the tracer's
 * table, user/torch/op_observer_layouts.cpp): the callback goes to
 * at::addGlobalCallback by value. */
struct lt_obs_layout {
	u32 size;
	u32 off_start, off_end;					/* StartCallback, EndCallback */
	u32 off_sampling_prob;					/* double, 1.0 */
	u32 off_scopes, num_scopes;				/* bool[NUM_SCOPES], all true */
	u32 off_needs_inputs, off_needs_outputs, off_needs_ids; /* bools, false */
	/* RecordScope::USER_SCOPE's index in scopes: record_function() scopes
	 * go to a second callback of that scope alone, so that their spans say
	 * so (LT_OBS_SPAN_USER), as torch.profiler tells user annotations apart. */
	u32 user_scope;
	/* Input shapes (--group-by-input-shapes), when `shapes` is 1: the
	 * callbacks then ask for inputs (needs_inputs) and read, in the start
	 * callback, RecordFunction's inputs_ (c10::ArrayRef<const IValue>: data,
	 * length) at off_inputs; each IValue is ivalue_size bytes with its u32
	 * tag at ivalue_tag, tag_tensor meaning a tensor whose first payload
	 * word is its TensorImpl*.  A TensorImpl whose first word is
	 * tensor_vtable (c10::TensorImpl's own, in this process) has its
	 * SizesAndStrides at word sizes_word: ndim, then the sizes inline
	 * (ndim <= 5) or a pointer to them. */
	u32 shapes;
	u32 off_inputs, ivalue_size, ivalue_tag, tag_tensor, sizes_word;
	u64 tensor_vtable;
};

struct lt_obs_header {
	u32 magic, version;
	u32 slots, ring; /* LT_OBS_SLOTS, LT_OBS_RING */
	u64 size;	 /* bytes of the whole buffer */
	u64 slots_offset, names_index_offset, names_offset, rings_offset;
	u32 bridge_pid; /* getpid() of the process that made it */
	u32 reader_pid; /* the tracer reading it (claimed with a compare-and-swap) */
	/* The tracer's request: layout written, then request bumped. */
	struct lt_obs_layout layout;
	u32 request;
	/* The bridge's answer to request `answered`. */
	u32 answered;
	u32 state; /* enum lt_obs_state */
	u32 names; /* names published (release) */
	char detail[160];
	u64 name_bytes;	 /* bytes of the name area used */
	u64 no_slot;	 /* calls not recorded: every thread slot taken */
	u64 activations; /* times the callback was registered */
	/* Input shapes as asked in the layout: LT_OBS_SHAPES_* (written by the
	 * bridge once its first calls' inputs were read safely), and why not. */
	u32 shapes_state;
	char shapes_detail[124];
};
enum lt_obs_shapes_state {
	LT_OBS_SHAPES_CHECKING = 1, /* the first calls' inputs are read with checks */
	LT_OBS_SHAPES_ON = 2,	    /* checked: spans carry their shapes */
	LT_OBS_SHAPES_OFF = 3,	    /* a check failed (shapes_detail): spans go on without */
};

/* One thread's ring.  The writer owns tid..open_since, the tracer `tail`.  A
 * slot whose thread exited is reused only once the tracer read it out. */
struct lt_obs_slot {
	u32 tid;      /* the thread writing it; 0 = never used */
	u32 free;     /* its thread exited */
	u64 head;     /* spans written (release) */
	u64 dropped;  /* spans lost: the ring was full */
	u64 too_deep; /* calls nested deeper than LT_OBS_DEPTH: not recorded */
	/* When the thread's outermost open call began (0: none open; 1: one is
	 * opening, its time not yet written): no call still to come from this
	 * thread starts before it (the tracer's watermark). */
	u64 open_since;
	u64 pad0[3];
	u64 tail; /* spans read (the tracer's) */
	u64 pad1[7];
};

/* One op call (a RecordFunction), measured on its thread. */
struct lt_obs_span {
	u64 start_ns, end_ns; /* CLOCK_MONOTONIC */
	u64 self_ns;	      /* end - start less the (end - start) of the calls it made */
	u32 name;	      /* index into the name table */
	u16 depth;	      /* 1 = outermost observed call on its thread */
	u16 flags;	      /* LT_OBS_SPAN_* */
};
#define LT_OBS_SPAN_USER 0x1 /* a record_function() scope (RecordScope::USER_SCOPE) */
/* Its name is "NAME\x1fSHAPES": the op's name, then its input shapes in
 * torch's format ("[[2, 3], []]"). */
#define LT_OBS_SPAN_SHAPES 0x2
#define LT_OBS_SHAPES_SEP '\x1f'

#ifdef __cplusplus
} /* namespace lt */
#endif

/* A name: at names_offset + index[id], a u32 length, then the bytes and a NUL. */

#endif
