/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Lightning actions from outside the process.
 *
 * One entry uprobe on _PyEval_EvalFrameDefault (never a uretprobe: see
 * docs/design-actions.md).  On 3.11+ it fires only when C calls into
 * Python, which is exactly how Lightning drives its Profiler.profile
 * generator (builtin next() / gen.throw()).  Each hit:
 *   1. drops out unless the process is a target (hash lookup);
 *   2. classifies the frame's code object, cached per code address with a
 *      checksum so a reused address is reclassified;
 *   3. for the few interesting classes, emits one fixed-size event.
 * Everything else (pairing, nesting, names, reports) is user space's job.
 */
#include "common.bpf.h"

#define CO_GENERATOR 0x20
#define OWNER_GENERATOR 1

struct code_key {
	u32 tgid;
	u32 generation;
	u64 code;
};

struct code_val {
	u32 cls;
	u32 checksum;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct code_key);
	__type(value, struct code_val);
} lt_code_cache SEC(".maps");

/* Scratch space for one event per CPU is not needed: events are reserved
 * directly in the ring buffer. */

static __always_inline u64 read_u64(u64 addr)
{
	u64 v = 0;
	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

static __always_inline s32 read_s32(u64 addr)
{
	s32 v = 0;
	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* Compact ASCII str object: returns its length, or -1 if it is not one. */
static __always_inline long ascii_len(u64 str)
{
	u64 hdr[3] = {}; /* ob_refcnt, ob_type, length */
	u32 state = 0;
	if (!str || bpf_probe_read_user(hdr, sizeof(hdr), (void *)str))
		return -1;
	if (bpf_probe_read_user(&state, sizeof(state), (void *)(str + 32)))
		return -1;
	/* compact (bit 5) and ascii (bit 6) */
	if (!(state & (1u << 5)) || !(state & (1u << 6)))
		return -1;
	if ((s64)hdr[2] < 0 || hdr[2] > 4096)
		return -1;
	return (long)hdr[2];
}

/* Does the ASCII str at `str` equal `lit` (NUL-terminated, < 16 bytes)? */
static __always_inline int str_equals(u64 str, const struct lt_py_offsets *o, const char *lit, int lit_len)
{
	char buf[16] = {};
	if (ascii_len(str) != lit_len)
		return 0;
	if (bpf_probe_read_user(buf, lit_len & 15, (void *)(str + o->str_ascii_data)))
		return 0;
#pragma unroll
	for (int i = 0; i < 16; i++) {
		if (i >= lit_len)
			break;
		if (buf[i] != lit[i])
			return 0;
	}
	return 1;
}

/* Does the ASCII str at `str` end with `suffix` (< 32 bytes)? */
static __always_inline int str_endswith(u64 str, const struct lt_py_offsets *o, const char *suffix, int suf_len)
{
	char buf[32] = {};
	long len = ascii_len(str);
	if (len < suf_len)
		return 0;
	u64 at = str + o->str_ascii_data + (u64)(len - suf_len);
	if (bpf_probe_read_user(buf, suf_len & 31, (void *)at))
		return 0;
#pragma unroll
	for (int i = 0; i < 32; i++) {
		if (i >= suf_len)
			break;
		if (buf[i] != suffix[i])
			return 0;
	}
	return 1;
}

static __always_inline u32 code_checksum(u64 code, const struct lt_py_offsets *o)
{
	u32 argc = (u32)read_s32(code + o->code_argcount);
	u32 flags = (u32)read_s32(code + o->code_flags);
	u32 line = (u32)read_s32(code + o->code_firstlineno);
	return (argc * 2654435761u) ^ (flags * 40503u) ^ (line * 97u) ^ 0x9e37u;
}

static __always_inline u32 classify_uncached(u64 code, const struct lt_py_offsets *o)
{
	u64 name = read_u64(code + o->code_name);
	u64 filename = read_u64(code + o->code_filename);
	s32 argc = read_s32(code + o->code_argcount);
	s32 flags = read_s32(code + o->code_flags);

	if (str_equals(name, o, "profile", 7)) {
		if (argc != 2 || !(flags & CO_GENERATOR))
			return LT_CODE_OTHER;
		/* lightning/pytorch/profilers/profiler.py (lightning wheel) or
		 * pytorch_lightning/profilers/profiler.py (pytorch-lightning) */
		if (str_endswith(filename, o, "pytorch/profilers/profiler.py", 29) ||
		    str_endswith(filename, o, "lightning/profilers/profiler.py", 31))
			return LT_CODE_PROFILE_GEN;
		return LT_CODE_OTHER;
	}
	int is_start = str_equals(name, o, "start", 5);
	int is_stop = !is_start && str_equals(name, o, "stop", 4);
	if (is_start || is_stop) {
		if (argc != 2 || (flags & CO_GENERATOR))
			return LT_CODE_OTHER;
		u64 names = read_u64(code + o->code_varnames);
		u64 second = read_u64(names + 24 + 8); /* tuple ob_item[1] */
		if (!str_equals(second, o, "action_name", 11))
			return LT_CODE_OTHER;
		return is_start ? LT_CODE_START : LT_CODE_STOP;
	}
	/* 3.11+ only: the dataloader fetch actions call Profiler.start/stop
	 * from Python, which CPython inlines (no C-level evaluation).  The
	 * fetch itself goes through builtin next(CombinedLoader). */
	if (o->py_minor >= 11 && str_equals(name, o, "__next__", 8) &&
	    str_endswith(filename, o, "/combined_loader.py", 19))
		return LT_CODE_FETCH;
	return LT_CODE_OTHER;
}

static __always_inline u32 classify(u32 tgid, const struct lt_target *t, u64 code)
{
	struct code_key key = {.tgid = tgid, .generation = t->generation, .code = code};
	u32 sum = code_checksum(code, &t->off);
	struct code_val *hit = bpf_map_lookup_elem(&lt_code_cache, &key);
	if (hit && hit->checksum == sum)
		return hit->cls;
	struct code_val val = {.cls = classify_uncached(code, &t->off), .checksum = sum};
	bpf_map_update_elem(&lt_code_cache, &key, &val, BPF_ANY);
	return val.cls;
}

/* Class of an already-seen code object, without classifying it. */
static __always_inline u32 cached_class(u32 tgid, const struct lt_target *t, u64 code)
{
	struct code_key key = {.tgid = tgid, .generation = t->generation, .code = code};
	struct code_val *hit = bpf_map_lookup_elem(&lt_code_cache, &key);
	return hit ? hit->cls : LT_CODE_OTHER;
}

/* The frame that was executing when C called into Python.  On 3.8-3.10 the
 * new frame is already linked (f_back); on 3.11+ it is not linked yet, so
 * the thread state's current frame is the caller. */
static __always_inline u64 caller_frame(u64 tstate, u64 frame, const struct lt_py_offsets *o)
{
	if (o->py_minor <= 10)
		return read_u64(frame + o->frame_back);
	u64 p = read_u64(tstate + o->tstate_frame);
	if (o->cframe_current != 0xffff && p)
		p = read_u64(p + o->cframe_current);
	return p;
}

/* First resume of a generator (runs start(), stops at the yield)?
 * Returns 1 first, 0 later, -1 not a resume at all (3.11 creation). */
static __always_inline int generator_first_resume(u64 frame, u64 code, const struct lt_py_offsets *o)
{
	if (o->py_minor <= 10)
		return read_s32(frame + o->frame_lasti) == -1 ? 1 : 0;
	u8 owner = 0xff;
	bpf_probe_read_user(&owner, 1, (void *)(frame + o->frame_owner));
	if (owner != OWNER_GENERATOR)
		return -1;
	u64 ip = read_u64(frame + o->frame_lasti);
	u64 start = code + o->code_adaptive;
	s32 first_traceable = read_s32(code + o->code_firsttraceable);
	/* ip may sit one unit before the bytecode (3.11/3.12 prev_instr) */
	if (ip < start)
		return 1;
	return (s64)((ip - start) >> 1) < (s64)first_traceable ? 1 : 0;
}

static __always_inline void emit_action(u16 kind, u64 key, u64 frame, u32 flags, const struct lt_py_offsets *o,
					int with_name)
{
	struct lt_action_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop();
		return;
	}
	lt_fill_header(&e->hdr, kind, sizeof(*e));
	e->key = key;
	e->flags = flags;
	e->name_ptr = 0;
	e->name_len = 0;
	e->name[0] = 0;
	if (with_name) {
		/* localsplus slot 1 is action_name for profile/start/stop */
		u64 s = read_u64(frame + o->frame_localsplus + 8);
		long len = ascii_len(s);
		e->name_ptr = s;
		if (len < 0) {
			e->flags |= LT_ACT_NAME_UNREADABLE;
			lt_count_read_fault();
		} else {
			e->name_len = (u32)len;
			if (len >= LT_NAME_MAX)
				e->flags |= LT_ACT_NAME_TRUNCATED;
			/* compact str data is NUL-terminated */
			if (bpf_probe_read_user_str(e->name, LT_NAME_MAX, (void *)(s + o->str_ascii_data)) < 0)
				e->flags |= LT_ACT_NAME_UNREADABLE;
		}
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

static __always_inline void emit_fetch(u64 caller, const struct lt_py_offsets *o)
{
	struct lt_fetch_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop();
		return;
	}
	lt_fill_header(&e->hdr, LT_EV_FETCH_BEGIN, sizeof(*e));
	u64 f = caller;
#pragma unroll
	for (int i = 0; i < LT_CALLER_DEPTH; i++) {
		e->caller_code[i] = f ? read_u64(f + o->frame_code) : 0;
		e->caller_self[i] = f ? read_u64(f + o->frame_localsplus) : 0;
		f = f ? read_u64(f + o->frame_back) : 0;
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

SEC("uprobe")
int BPF_KPROBE(lt_eval_entry, u64 a0, u64 a1, u64 a2)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t)
		return 0;
	const struct lt_py_offsets *o = &t->off;

	/* 3.8: (frame, throwflag); 3.9+: (tstate, frame, throwflag) */
	u64 tstate = o->eval_frame_arg == 0 ? 0 : a0;
	u64 frame = o->eval_frame_arg == 0 ? a0 : a1;
	u32 throwflag = (u32)(o->eval_frame_arg == 0 ? a1 : a2);
	u64 code = read_u64(frame + o->frame_code);
	if (!code)
		return 0;

	u32 cls = classify(tgid, t, code);
	if (cls == LT_CODE_OTHER)
		return 0;

	if (cls == LT_CODE_PROFILE_GEN) {
		int first = generator_first_resume(frame, code, o);
		if (first < 0)
			return 0; /* 3.11 creation evaluation: only RETURN_GENERATOR runs */
		if (first) {
			if (throwflag)
				return 0; /* thrown into before starting: start() never ran */
			emit_action(LT_EV_ACTION_BEGIN, frame, frame, 0, o, 1);
		} else {
			emit_action(LT_EV_ACTION_END, frame, frame, throwflag ? LT_ACT_THROW : 0, o, 0);
		}
		return 0;
	}

	u64 caller = caller_frame(tstate, frame, o);
	if (cls == LT_CODE_FETCH) {
		emit_fetch(caller, o);
		return 0;
	}
	/* START / STOP: called directly (fetchers, manual optimizer_step), not
	 * from inside Profiler.profile, which we already see as a generator. */
	if (caller && cached_class(tgid, t, read_u64(caller + o->frame_code)) == LT_CODE_PROFILE_GEN)
		return 0;
	emit_action(cls == LT_CODE_START ? LT_EV_DIRECT_START : LT_EV_DIRECT_STOP, 0, frame, 0, o, 1);
	return 0;
}
