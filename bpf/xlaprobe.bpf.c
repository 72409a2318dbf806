/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * torch_xla's runtime: one entry probe per site of its _XLAC extension
 * (docs/design-xla.md; never return probes: the runtime throws).  The
 * attach cookie is the enum lt_xla_site.  The PJRT client's methods return
 * std::vector by value (through a hidden pointer in rdi), so `this` is in
 * rsi and a Span argument (pointer, length) in rdx, rcx.  MarkStep,
 * ~TimedSection and Metric::AddSample return nothing: `this` is in rdi,
 * AddSample's timestamp in rsi (its value is a double in xmm0, which a
 * uprobe cannot read).  A TimedSection is { Metric* metric_; int64 start_ }:
 * BPF reads both, so a timer that ends on another thread than the one that
 * started it (ExecuteComputation's, when the execution completes) still
 * gives its exact time.
 */
#include "common.bpf.h"

SEC("uprobe")
int lt_xla_hook(struct pt_regs *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_target *t = bpf_map_lookup_elem(&lt_targets, &tgid);
	if (!t || !(t->flags & LT_TARGET_XLA))
		return 0;
	u64 site = bpf_get_attach_cookie(ctx);
	/* Every argument register read once, up front (as memprobe does). */
	u64 a1 = ctx->di, a2 = ctx->si, a4 = ctx->cx;
	u64 obj = 0, arg = 0;
	u32 flags = 0;
	switch (site) {
	case LT_XLA_COMPILE:
	case LT_XLA_EXECUTE:
	case LT_XLA_EXECUTE_REPLICATED:
		obj = a2;
		break;
	case LT_XLA_TO_DEVICE:
	case LT_XLA_FROM_DEVICE:
		obj = a2;
		arg = a4; /* the Span's length */
		break;
	case LT_XLA_MARK_STEP:
		obj = a1;
		break;
	case LT_XLA_TIMED_END: {
		u64 section[2];
		if (bpf_probe_read_user(section, sizeof(section), (void *)a1)) {
			flags |= LT_XLA_UNREAD;
		} else {
			obj = section[0];
			arg = section[1];
		}
		break;
	}
	case LT_XLA_METRIC_SAMPLE:
		obj = a1;
		arg = a2;
		break;
	case LT_XLA_METRIC_VALUE:
		obj = a1; /* its value is in xmm0: user space reads it from the metric's samples */
		break;
	default:
		return 0;
	}
	struct lt_xla_event *e = bpf_ringbuf_reserve(&lt_events, sizeof(*e), 0);
	if (!e) {
		lt_count_ringbuf_drop(LT_EV_XLA);
		return 0;
	}
	lt_fill_header(&e->hdr, LT_EV_XLA, sizeof(*e));
	e->obj = obj;
	e->arg = arg;
	e->site = (u32)site;
	e->flags = flags;
	bpf_ringbuf_submit(e, LT_RB_SUBMIT);
	return 0;
}
