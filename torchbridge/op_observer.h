// The op observer: a RecordFunction callback registered in the job's torch
// (at::addGlobalCallback, resolved in libtorch_cpu.so at run time), which
// times every op call torch.profiler would record, on its own thread, and
// writes it to memory shared with the tracer (bpf/opobserver_shm.h).  Off
// unless a tracer holds ltrace:ops's semaphore; removed again within one
// poll of the semaphore falling, which a tracer killed at any point also
// causes (the kernel drops its uprobe).  docs/design-op-observer.md.
#pragma once

namespace ltb::ops {

// The poll thread's step (every 100 ms): makes the buffer, applies the
// tracer's request, registers or removes the callback.
void tick() noexcept;
// A forked child keeps torch's callback list but must never write into the
// parent's buffer: its callbacks return at once.
void atfork_child() noexcept;

}  // namespace ltb::ops
