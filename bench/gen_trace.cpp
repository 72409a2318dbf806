// Writes a synthetic trace of N action events with Lightning's shape (a
// training step of nested hooks, ~40 distinct names, realistic durations),
// for the offline report benchmark: bench/offline.py.  With OPS_PER_STEP,
// each training step also holds that many aten op entries (OP records, as
// the op probes write them: pairs of a depth-1 op and its depth-2 child,
// half in training_step, half in backward), for the dashboard's step
// timeline with ops (bench/dashboard_page.py --ops-per-step).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "user/tracefile/trace_writer.h"

using namespace lt;

namespace {
tracefile::TraceWriter* w;
u64 now = 1'000'000'000;
u64 emitted = 0;
u64 next_frame = 0x7f0000000000;  // one address per live generator, as in CPython
u64 ops_per_step = 0;

// `n` op entries on the loop's thread, 2 us apart: "aten::linear" (depth 1)
// then its "aten::addmm" (depth 2), repeated.  No return is recorded (the
// probes see none): the next entry closes them.
void ops(u64 n) {
  for (u64 k = 0; k < n; ++k) {
    lt_op_event e{};
    e.hdr = {LT_EV_OP, sizeof e, 4242, 4242, 0, now};
    e.op = static_cast<u32>(k % 2);
    e.depth = static_cast<u16>(1 + k % 2);
    w->append(&e, sizeof e);
    now += 2'000;
  }
}

void action(u16 kind, u64 key, const std::string& name) {
  lt_action_event e{};
  e.hdr = {kind, sizeof e, 4242, 4242, 0, now};
  e.key = key;
  std::strncpy(e.name, name.c_str(), sizeof e.name - 1);
  e.name_len = static_cast<u32>(name.size());
  w->append(&e, sizeof e);
  ++emitted;
}

// One action of `name` lasting about `dur` ns around `body`.
template <typename F>
void span(const std::string& name, u64 dur, F&& body) {
  u64 key = next_frame += 0x200;
  action(LT_EV_ACTION_BEGIN, key, name);
  now += dur / 2 + (emitted * 7919) % 997;
  body();
  now += dur / 2;
  action(LT_EV_ACTION_END, key, "");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: gen_trace FILE N_EVENTS [OPS_PER_STEP]\n");
    return 2;
  }
  const u64 target = std::strtoull(argv[2], nullptr, 10);
  if (argc == 4) ops_per_step = std::strtoull(argv[3], nullptr, 10);
  tracefile::TraceWriter writer(argv[1]);
  w = &writer;
  lt_window_event win{};
  win.hdr = {LT_EV_WINDOW, sizeof win, 0, 0, 0, now};
  win.begin = 1;
  writer.append(&win, sizeof win);
  lt_proc_info_event pi{};
  pi.hdr = {LT_EV_PROC_INFO, sizeof pi, 4242, 4242, 0, now};
  pi.rank = pi.local_rank = pi.world_size = -1;
  pi.flags = LT_PROC_PYTHON;
  std::strcpy(pi.cmdline, "python train.py (synthetic)");
  writer.append(&pi, sizeof pi);
  if (ops_per_step) {
    const char* names[2] = {"aten::linear", "aten::addmm"};
    for (u32 k = 0; k < 2; ++k) {
      lt_op_name_event n{};
      n.hdr = {LT_EV_OP_NAME, sizeof n, 4242, 4242, 0, now};
      n.op = k;
      std::strcpy(n.name, names[k]);
      writer.append(&n, sizeof n);
    }
  }
  const std::vector<std::string> cbs = {"TQDMProgressBar", "ModelSummary", "LearningRateMonitor"};
  while (emitted < target) {
    span("run_training_batch", 900'000, [&] {
      span("[_TrainingEpochLoop].train_dataloader_next", 60'000, [] {});
      span("[LightningModule]BoringModel.on_before_batch_transfer", 2'000, [] {});
      span("[Strategy]SingleDeviceStrategy.batch_to_device", 20'000, [] {
        span("[LightningModule]BoringModel.transfer_batch_to_device", 10'000, [] {});
        span("[LightningModule]BoringModel.on_after_batch_transfer", 2'000, [] {});
      });
      for (auto& c : cbs) span("[Callback]" + c + ".on_train_batch_start", 2'000, [] {});
      span("[LightningModule]BoringModel.optimizer_step", 700'000, [&] {
        span("[Strategy]SingleDeviceStrategy.training_step", 150'000, [] { ops(ops_per_step / 2); });
        span("[LightningModule]BoringModel.optimizer_zero_grad", 30'000, [] {});
        span("[Strategy]SingleDeviceStrategy.backward", 300'000, [&] {
          ops(ops_per_step - ops_per_step / 2);
          for (auto& c : cbs) span("[Callback]" + c + ".on_before_backward", 2'000, [] {});
          span("[LightningModule]BoringModel.on_after_backward", 2'000, [] {});
        });
        span("[LightningModule]BoringModel.on_before_optimizer_step", 2'000, [] {});
      });
      for (auto& c : cbs) span("[Callback]" + c + ".on_train_batch_end", 2'000, [] {});
    });
  }
  win.begin = 0;
  win.hdr.ts_ns = now;
  writer.append(&win, sizeof win);
  lt_drops_event d{};
  d.hdr = {LT_EV_DROPS, sizeof d, 0, 0, 0, now};
  writer.append(&d, sizeof d);
  writer.close();
  std::printf("%llu events, %llu bytes\n", static_cast<unsigned long long>(emitted),
              static_cast<unsigned long long>(writer.bytes_written()));
  return 0;
}
