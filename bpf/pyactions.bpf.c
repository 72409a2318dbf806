/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Lightning actions from outside the process.
 *
 * Lightning times an action with a @contextmanager generator,
 * Profiler.profile: contextlib's __enter__ resumes it with next() (start),
 * __exit__ resumes it again with next() or gen.throw() (stop).  Both go
 * through CPython's C generator entry points, which we probe with entry
 * uprobes only (never uretprobes, see docs/design-actions.md):
 *   builtin_next(mod, args, n)  next(gen)      -> start or normal stop
 *                               next(CombinedLoader) -> a dataloader fetch
 *   gen_throw(gen, ...)         gen.throw(exc) -> stop on an exception
 * builtins.next is called a few dozen times per training step, not on
 * every generator iteration or Python call, which keeps the cost low.
 *
 * PGO builds (Debian's python3.11) may inline copies of these into hot
 * callers, where a probe would miss them.  User space detects that and takes
 * resumes from lt_eval_entry instead: an entry uprobe on
 * _PyEval_EvalFrameDefault, which every resume reaches, at the price of a
 * hit on every C-to-Python call.
 *
 * Each hit: drop out unless the process is a target; classify the code (or
 * type) object, cached per address with a checksum; emit one fixed-size
 * event for the few interesting ones.  Pairing, nesting, naming and reports
 * are user space's job.
 */
#include "common.bpf.h"
#include "pyorigin.bpf.h"
#include "pyread.bpf.h"

#define CO_VARARGS 0x4
#define CO_VARKEYWORDS 0x8
#define CO_GENERATOR 0x20

struct class_key {
	u32 tgid;
	u32 generation;
	u64 addr;
};

struct class_val {
	u32 cls;
	u32 checksum;
	s32 first_traceable; /* code objects, 3.11+: index of the first RESUME */
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct class_key);
	__type(value, struct class_val);
} lt_class_cache SEC(".maps");

/* Compact ASCII str object: returns its length, or -1 if it is not one. */
static __always_inline long ascii_len(u64 str)
{
	u64 hdr[5] = {}; /* ob_refcnt, ob_type, length, hash, state */
	if (!str || bpf_probe_read_user(hdr, sizeof(hdr), (void *)str))
		return -1;
	u32 state = (u32)hdr[4];
	/* compact (bit 5) and ascii (bit 6) */
	if (!(state & (1u << 5)) || !(state & (1u << 6)))
		return -1;
	if ((s64)hdr[2] < 0 || hdr[2] > 4096)
		return -1;
	return (long)hdr[2];
}

/* Do the `len` bytes at user address `at` equal `lit` (len < 32)? */
static __always_inline int bytes_equal(u64 at, const char *lit, int len)
{
	char buf[32] = {};
	if (bpf_probe_read_user(buf, len & 31, (void *)at))
		return 0;
#pragma unroll
	for (int i = 0; i < 32; i++) {
		if (i >= len)
			break;
		if (buf[i] != lit[i])
			return 0;
	}
	return 1;
}

static __always_inline int str_equals(u64 str, const struct lt_py_offsets *o, const char *lit, int len)
{
	return ascii_len(str) == len && bytes_equal(str + o->str_ascii_data, lit, len);
}

static __always_inline int str_endswith(u64 str, const struct lt_py_offsets *o, const char *suffix, int len)
{
	long n = ascii_len(str);
	return n >= len && bytes_equal(str + o->str_ascii_data + (u64)(n - len), suffix, len);
}

/* torch.nn.Module._call_impl(self, *args, **kwargs) in
 * torch/nn/modules/module.py: one call per module __call__. */
static __always_inline u32 classify_module_call(u64 code, const struct lt_py_offsets *o)
{
	if (!str_equals(read_u64(code + o->code_name), o, "_call_impl", 10))
		return LT_CODE_OTHER;
	if (str_endswith(read_u64(code + o->code_filename), o, "torch/nn/modules/module.py", 26))
		return LT_CODE_MODULE_CALL;
	return LT_CODE_OTHER;
}

/* Lightning's Profiler.profile: a 2-argument generator named "profile" in
 * lightning/pytorch/profilers/profiler.py (lightning wheel) or
 * pytorch_lightning/profilers/profiler.py (pytorch-lightning wheel).  Or
 * Module._call_impl (argcount and flags tell the two apart before any
 * name is read). */
static __always_inline u32 classify_code(u64 code, const struct lt_py_offsets *o)
{
	s32 argcount = read_s32(code + o->code_argcount), flags = read_s32(code + o->code_flags);
	if (argcount == 1 && (flags & CO_VARARGS) && (flags & CO_VARKEYWORDS))
		return classify_module_call(code, o);
	if (argcount != 2 || !(flags & CO_GENERATOR))
		return LT_CODE_OTHER;
	if (!str_equals(read_u64(code + o->code_name), o, "profile", 7))
		return LT_CODE_OTHER;
	u64 filename = read_u64(code + o->code_filename);
	if (str_endswith(filename, o, "pytorch/profilers/profiler.py", 29) ||
	    str_endswith(filename, o, "lightning/profilers/profiler.py", 31))
		return LT_CODE_PROFILE_GEN;
	return LT_CODE_OTHER;
}

static __always_inline struct class_val cached_class(u32 tgid, const struct lt_target *t, u64 addr, u32 sum,
						     int is_type)
{
	struct class_key key = {.tgid = tgid, .generation = t->generation, .addr = addr};
	struct class_val *hit = bpf_map_lookup_elem(&lt_class_cache, &key);
	if (hit && hit->checksum == sum)
		return *hit;
	struct class_val val = {.checksum = sum};
	if (is_type) {
		/* tp_name of a heap type is its __name__ */
		val.cls =
		    bytes_equal(read_u64(addr + 24), "CombinedLoader", 15) ? LT_TYPE_COMBINED_LOADER : LT_CODE_OTHER;
	} else {
		val.cls = classify_code(addr, &t->off);
		if (val.cls == LT_CODE_PROFILE_GEN && t->off.py_minor >= 11)
			val.first_traceable = read_s32(addr + t->off.code_firsttraceable);
	}
	bpf_map_update_elem(&lt_class_cache, &key, &val, BPF_ANY);
	return val;
}

/* Is `code` Profiler.profile's code object?  Its address is remembered in
 * the target entry the first time it is classified (Lightning's module
 * lives as long as the process), so action resumes skip the cache. */
static __always_inline int profile_code(u32 tgid, const struct lt_target *t, u64 code, struct class_val *c)
{
	if (code == t->profile_code) {
		c->cls = LT_CODE_PROFILE_GEN;
		c->first_traceable = t->profile_first_traceable;
		return 1;
	}
	*c = cached_class(tgid, t, code, code_checksum(code, &t->off), 0);
	if (c->cls != LT_CODE_PROFILE_GEN)
		return 0;
	struct lt_target *w = (struct lt_target *)t; /* map values are writable */
	w->profile_first_traceable = c->first_traceable;
	w->profile_code = code;
	return 1;
}

/* The fields of a frame we need, read at once: every probe read costs
 * ~0.1 us in a VM, and they dominate the cost of a hit.  One 128-byte read
 * from the code field covers the code, the instruction pointer / f_lasti
 * and, on 3.11+, localsplus[1] (action_name). */
#define FRAME_BLOCK_WORDS 16
struct frame_view {
	u64 code;
	u64 lasti;    /* f_lasti (int, <=3.10) or instruction pointer (3.11+) */
	u64 name_obj; /* localsplus[1], 0 if outside the block */
};

static __always_inline int read_frame(u64 frame, const struct lt_py_offsets *o, struct frame_view *v)
{
	u64 block[FRAME_BLOCK_WORDS] = {};
	if (bpf_probe_read_user(block, sizeof(block), (void *)(frame + o->frame_code))) {
		/* The block can run past the end of a small frame into a page the
		 * target has never touched: on 3.11 a generator's frame (embedded
		 * in the generator, f_code 32 bytes in) ends before the block
		 * does, and a generator allocated last before an untouched page
		 * fails here (2-3 in 400,000 actions, issue 20).  BPF cannot
		 * fault pages in; read the fields we need one by one, all inside
		 * the frame. */
		v->name_obj = 0; /* on_profile_resume reads it from localsplus */
		if (bpf_probe_read_user(&v->code, sizeof(v->code), (void *)(frame + o->frame_code)) ||
		    bpf_probe_read_user(&v->lasti, sizeof(v->lasti), (void *)(frame + o->frame_lasti)))
			return -1;
		v->code &= ~(u64)o->stackref_tag_mask;
		return 0;
	}
	u32 lasti = (u32)(o->frame_lasti - o->frame_code) / 8;
	u32 name = (u32)(o->frame_localsplus + 8 - o->frame_code) / 8;
	v->code = block[0] & ~(u64)o->stackref_tag_mask; /* 3.14+: a tagged _PyStackRef */
	v->lasti = block[lasti & (FRAME_BLOCK_WORDS - 1)];
	if (lasti >= FRAME_BLOCK_WORDS)
		v->lasti = read_u64(frame + o->frame_lasti);
	v->name_obj = name < FRAME_BLOCK_WORDS ? block[name & (FRAME_BLOCK_WORDS - 1)] & ~(u64)o->stackref_tag_mask : 0;
	return 0;
}

/* Has this generator never run yet (so this resume runs start())? */
static __always_inline int first_resume(const struct frame_view *v, const struct class_val *c,
					const struct lt_py_offsets *o)
{
	if (o->py_minor <= 10)
		return (s32)v->lasti == -1;
	/* 3.11+: the instruction pointer is still before the first RESUME */
	u64 start = v->code + o->code_adaptive;
	if (v->lasti < start)
		return 1;
	return (s64)((v->lasti - start) >> 1) < (s64)c->first_traceable;
}

static __always_inline struct lt_action_event *reserve_action(u16 kind)
{
	struct lt_action_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(kind);
		return 0;
	}
	lt_fill_header(&e->hdr, kind, sizeof(*e));
	e->key = 0;
	e->name_ptr = 0;
	e->name_len = 0;
	e->flags = 0;
	e->name[0] = 0;
	return e;
}

/* The action_name str's header, read once for the tails and the BEGIN. */
struct name_view {
	u64 data;  /* address of its code units, 0 if not a readable compact str */
	u64 bytes; /* their size (len * kind) */
	u32 len;   /* code points */
	u32 kind;  /* 0 = ASCII, else 1, 2 or 4 */
};

static __always_inline void view_name(u64 s, const struct lt_py_offsets *o, struct name_view *n)
{
	u64 hdr[5] = {}; /* ob_refcnt, ob_type, length, hash, state */
	/* every field set: the verifier rejects a spill of an unset one */
	n->data = 0;
	n->bytes = 0;
	n->len = 0;
	n->kind = 0;
	if (!s || bpf_probe_read_user(hdr, sizeof(hdr), (void *)s))
		return;
	u32 state = (u32)hdr[4];
	u32 kind = (state >> 2) & 7;
	s64 len = (s64)hdr[2];
	if (!(state & (1u << 5)) || len < 0 || len > (1 << 20) || (kind != 1 && kind != 2 && kind != 4))
		return; /* not a compact str */
	n->len = (u32)len;
	if (state & (1u << 6)) { /* ASCII */
		n->kind = 0;
		n->bytes = (u64)len;
		n->data = s + o->str_ascii_data;
	} else {
		n->kind = kind;
		n->bytes = (u64)len * kind;
		n->data = s + o->str_compact_data;
	}
}

/* What the BEGIN itself carries: ASCII as NUL-terminated text (so one byte
 * less), other kinds as raw code units. */
static __always_inline u64 name_head_bytes(const struct name_view *n)
{
	return n->kind ? LT_NAME_MAX : LT_NAME_MAX - 1;
}

/* The rest of a long name, in ACTION_NAME_TAILs before the BEGIN (bounded:
 * LT_NAME_TAILS_MAX records; past that the last one carries the name's end). */
static __always_inline void emit_name_tails(u64 key, const struct name_view *n)
{
	u64 head = name_head_bytes(n);
	if (!n->data || n->bytes <= head)
		return;
	for (int i = 0; i < LT_NAME_TAILS_MAX; i++) {
		u64 off = head + (u64)i * LT_NAME_TAIL_CHUNK;
		if (off >= n->bytes)
			break;
		if (i == LT_NAME_TAILS_MAX - 1 && n->bytes - off > LT_NAME_TAIL_CHUNK)
			off = n->bytes - LT_NAME_TAIL_CHUNK; /* the end; a multiple of the kind, as bytes is */
		u64 size = n->bytes - off;
		if (size > LT_NAME_TAIL_CHUNK)
			size = LT_NAME_TAIL_CHUNK;
		struct lt_action_name_tail_event *t = bpf_ringbuf_reserve(&lt_events, sizeof(*t), 0);
		if (!t) {
			lt_count_ringbuf_drop(LT_EV_ACTION_NAME_TAIL);
			return;
		}
		lt_fill_header(&t->hdr, LT_EV_ACTION_NAME_TAIL, sizeof(*t));
		t->key = key;
		t->offset = (u32)off;
		t->bytes = (u32)size;
		if (bpf_probe_read_user(t->chunk, size, (void *)(n->data + off))) {
			t->bytes = 0;
			lt_count_read_fault(LT_EV_ACTION_NAME_TAIL);
		}
		bpf_ringbuf_submit(t, LT_RB_SUBMIT);
	}
}

/* Copies the head of the action_name str into the BEGIN: ASCII as text;
 * other compact strs as raw code units with their kind in the flags (user
 * space decodes and appends the tails). */
static __always_inline void read_name(struct lt_action_event *e, const struct name_view *n)
{
	if (!n->data) {
		e->flags |= LT_ACT_NAME_UNREADABLE;
		lt_count_read_fault(LT_EV_ACTION_BEGIN);
		return;
	}
	e->name_len = n->len;
	u64 head = name_head_bytes(n);
	if (n->bytes > head)
		e->flags |= LT_ACT_NAME_TRUNCATED;
	if (!n->kind) {
		if (bpf_probe_read_user_str(e->name, LT_NAME_MAX, (void *)n->data) < 0)
			e->flags |= LT_ACT_NAME_UNREADABLE;
		return;
	}
	u64 bytes = n->bytes > head ? head : n->bytes;
	e->flags |= n->kind << LT_ACT_NAME_KIND_SHIFT;
	if (bpf_probe_read_user(e->name, bytes & 0xff, (void *)n->data))
		e->flags |= LT_ACT_NAME_UNREADABLE;
}

/* A resume of generator frame `frame` running `code` (already known to be
 * Profiler.profile): the first runs start() (BEGIN), the next one stop() (END). */
static __always_inline int on_profile_resume(u64 frame, const struct frame_view *v, const struct class_val *c,
					     u32 throw, const struct lt_target *t)
{
	const struct lt_py_offsets *o = &t->off;
	if (first_resume(v, c, o)) {
		if (throw)
			return 0; /* thrown into before it started: start() never runs */
		/* localsplus slot 1 is action_name (slot 0 is self) */
		u64 s =
		    v->name_obj ? v->name_obj : read_u64(frame + o->frame_localsplus + 8) & ~(u64)o->stackref_tag_mask;
		struct name_view n;
		view_name(s, o, &n);
		emit_name_tails(frame, &n);
		struct lt_action_event *e = reserve_action(LT_EV_ACTION_BEGIN);
		if (!e)
			return 0;
		e->key = frame;
		e->name_ptr = s;
		read_name(e, &n);
		bpf_ringbuf_submit(e, LT_RB_SUBMIT);
		emit_origin(t, frame, LT_EV_ACTION_BEGIN, 1);
		return 0;
	}
	struct lt_action_event *e = reserve_action(LT_EV_ACTION_END);
	if (!e)
		return 0;
	e->key = frame;
	e->flags = throw ? LT_ACT_THROW : 0;
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	return 0;
}

/* Reads the frame and tells whether it runs Profiler.profile. */
static __always_inline int is_profile_frame(u32 tgid, const struct lt_target *t, u64 frame, struct frame_view *v,
					    struct class_val *c)
{
	if (read_frame(frame, &t->off, v)) {
		/* Not known to be an action: counted so that a report never
		 * says nothing was lost when a resume went unseen. */
		lt_count_unreadable(LT_EV_NONE);
		return 0;
	}
	if (!v->code)
		return 0;
	return profile_code(tgid, t, v->code, c);
}

static __always_inline int on_resume(u32 tgid, const struct lt_target *t, u64 gen, u32 throw)
{
	if (!gen)
		return 0;
	const struct lt_py_offsets *o = &t->off;
	u64 frame = o->gen_frame_embedded ? gen + o->gen_frame : read_u64(gen + o->gen_frame);
	struct frame_view v;
	struct class_val c;
	if (!frame || !is_profile_frame(tgid, t, frame, &v, &c))
		return 0; /* finished generator, unreadable, or another generator */
	return on_profile_resume(frame, &v, &c, throw, t);
}

/* MODULE_CALL: `frame` runs Module._call_impl; its self is localsplus[0]. */
static __always_inline int emit_module_call(const struct lt_target *t, u64 frame, u64 code)
{
	const struct lt_py_offsets *o = &t->off;
	u64 self = read_u64(frame + o->frame_localsplus) & ~(u64)o->stackref_tag_mask;
	u32 depth = callee_depth(t);
	struct lt_module_call_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_MODULE_CALL);
		return 0;
	}
	lt_fill_header(&e->hdr, LT_EV_MODULE_CALL, sizeof(*e));
	e->self = self;
	e->frame = frame;
	e->code = code;
	e->depth = depth;
	e->pad = 0;
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	return 0;
}

/* Every frame the eval loop starts: attached when generator resumes must
 * come from here (LT_TARGET_GEN_VIA_EVAL, PGO builds) or module calls are
 * wanted (LT_TARGET_MODULES); each target takes only what it asked for. */
SEC("uprobe")
int BPF_KPROBE(lt_eval_entry, u64 a0, u64 a1, u64 a2)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t || !(t->flags & (LT_TARGET_GEN_VIA_EVAL | LT_TARGET_MODULES)))
		return 0;
	const struct lt_py_offsets *o = &t->off;
	/* 3.8: (frame, throwflag); 3.9+: (tstate, frame, throwflag) */
	u64 frame = o->eval_frame_arg == 0 ? a0 : a1;
	u32 throw = (u32)(o->eval_frame_arg == 0 ? a1 : a2);
	struct frame_view v;
	struct class_val c;
	if (read_frame(frame, o, &v)) {
		/* Not known to be an action (or a module call): counted so that a
		 * report never says nothing was lost when one went unseen. */
		lt_count_unreadable((t->flags & LT_TARGET_GEN_VIA_EVAL) ? LT_EV_NONE : LT_EV_MODULE_CALL);
		return 0;
	}
	if (!v.code)
		return 0;
	if (!profile_code(tgid, t, v.code, &c)) {
		if (c.cls == LT_CODE_MODULE_CALL && (t->flags & LT_TARGET_MODULES))
			return emit_module_call(t, frame, v.code);
		return 0;
	}
	if (!(t->flags & LT_TARGET_GEN_VIA_EVAL))
		return 0; /* builtin_next and gen_throw take this target's resumes */
	if (o->py_minor >= 11) {
		/* Only frames owned by a generator are resumes; 3.11 also evaluates
		 * the code once at creation (owned by the thread) to build it. */
		u8 owner = 0xff;
		bpf_probe_read_user(&owner, 1, (void *)(frame + o->frame_owner));
		if (owner != 1)
			return 0;
	}
	return on_profile_resume(frame, &v, &c, throw, t);
}

/* builtins.next(iterator[, default]): contextlib resumes Profiler.profile
 * with it, and Lightning's fetcher fetches a batch with next(CombinedLoader). */
SEC("uprobe")
int BPF_KPROBE(lt_next, u64 module, u64 args, u64 nargs)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t || nargs < 1)
		return 0;
	u64 it = read_u64(args);
	u64 type = it ? read_u64(it + 8) : 0;
	if (!type)
		return 0;
	if (type == t->gen_type)
		return (t->flags & LT_TARGET_GEN_VIA_EVAL) ? 0 : on_resume(tgid, t, it, 0);
	/* Type objects live as long as their classes: no checksum needed. */
	if (cached_class(tgid, t, type, 0, 1).cls != LT_TYPE_COMBINED_LOADER)
		return 0;
	struct lt_action_event *e = reserve_action(LT_EV_FETCH_BEGIN);
	if (!e)
		return 0;
	e->key = it;
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	emit_origin(t, it, LT_EV_FETCH_BEGIN, 0);
	return 0;
}

/* Py_FinalizeEx: a target's interpreter begins to shut down.  Its last
 * samples name code objects that only the live process can tell us, and
 * the drain reads the main ring on a 20 ms timer (its records never wake
 * it), which a short job's exit can outrun: a frame left <unknown>.  So
 * this wakes the drain at once, through a ring of its own (a waiter on the
 * main ring would be woken by every record: it always has data).  The
 * drain then seizes the thread so that its exit waits until the drain has
 * read it (user/proc/exit_hold.h). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} lt_wakeups SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(lt_finalize)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tgid = pid_tgid >> 32;
	if (!bpf_map_lookup_elem(&lt_targets, &tgid))
		return 0;
	/* The thread, too: the drain seizes it to hold its exit. */
	bpf_ringbuf_output(&lt_wakeups, &pid_tgid, sizeof(pid_tgid), BPF_RB_FORCE_WAKEUP);
	return 0;
}

/* generator.throw(exc): contextlib's __exit__ on an exception */
SEC("uprobe")
int BPF_KPROBE(lt_gen_throw, u64 gen)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	/* A target whose resumes come through the eval loop has them there
	 * (its throws too: the throwflag), as lt_next leaves them. */
	if (!t || (t->flags & LT_TARGET_GEN_VIA_EVAL))
		return 0;
	return on_resume(tgid, t, gen, 1);
}
