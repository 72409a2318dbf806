// Perfetto's protobuf trace: the hand-written encoder against the encodings
// protobuf's documentation gives, and the writer's packets decoded back
// (with a small decoder here: field numbers, nesting, strict slice nesting,
// interned names, launch -> kernel flows); --steps/--window values and what
// a range keeps.
#include "reports/export/perfetto_trace.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bpf/events.h"
#include "reports/export/export_range.h"
#include "reports/export/proto_encoder.h"

using namespace lt;

namespace {

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (!out.empty()) out += ' ';
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string varint_hex(std::uint64_t v) {
  std::string s;
  append_varint(s, v);
  return hex(s);
}

// ---- a minimal decoder of the wire format, for the writer's output ----
struct Field {
  std::uint32_t number = 0;
  unsigned wire = 0;
  std::uint64_t value = 0;  // varint / fixed64
  std::string bytes;        // length-delimited
};

std::uint64_t read_varint(const std::string& s, std::size_t& at) {
  std::uint64_t v = 0;
  for (int shift = 0; at < s.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(s[at++]);
    v |= std::uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("truncated varint");
}

std::vector<Field> fields(const std::string& s) {
  std::vector<Field> out;
  for (std::size_t at = 0; at < s.size();) {
    const std::uint64_t tag = read_varint(s, at);
    Field f{static_cast<std::uint32_t>(tag >> 3), static_cast<unsigned>(tag & 7)};
    if (f.wire == 0) {
      f.value = read_varint(s, at);
    } else if (f.wire == 1) {
      if (at + 8 > s.size()) throw std::runtime_error("truncated fixed64");
      for (int i = 0; i < 8; ++i) f.value |= std::uint64_t{static_cast<unsigned char>(s[at + i])} << (8 * i);
      at += 8;
    } else if (f.wire == 2) {
      const std::uint64_t n = read_varint(s, at);
      if (at + n > s.size()) throw std::runtime_error("truncated bytes");
      f.bytes = s.substr(at, n);
      at += n;
    } else {
      throw std::runtime_error("wire type " + std::to_string(f.wire));
    }
    out.push_back(std::move(f));
  }
  return out;
}

const Field* field(const std::vector<Field>& fs, std::uint32_t number) {
  for (const auto& f : fs)
    if (f.number == number) return &f;
  return nullptr;
}

// A decoded TrackEvent packet.
struct Event {
  std::uint64_t ts = 0, type = 0, track = 0;
  std::string name;  // resolved through the interned names
  std::vector<std::uint64_t> flows, terminating;
};

struct Decoded {
  std::map<std::uint64_t, std::string> track_names;  // uuid -> process/thread/track name
  std::vector<Event> events;
  std::size_t packets = 0;
};

Decoded decode(const std::string& trace) {
  Decoded d;
  std::map<std::uint64_t, std::string> names;
  for (const Field& p : fields(trace)) {
    EXPECT_EQ(p.number, 1u);
    EXPECT_EQ(p.wire, 2u);
    ++d.packets;
    const auto pf = fields(p.bytes);
    if (const Field* in = field(pf, 12))
      for (const Field& e : fields(in->bytes))
        if (e.number == 2) {
          const auto ef = fields(e.bytes);
          names[field(ef, 1)->value] = field(ef, 2)->bytes;
        }
    if (const Field* td = field(pf, 60)) {
      const auto tf = fields(td->bytes);
      std::string name;
      if (const Field* n = field(tf, 2)) name = n->bytes;
      if (const Field* pr = field(tf, 3)) name = field(fields(pr->bytes), 6)->bytes;
      if (const Field* th = field(tf, 4)) name = field(fields(th->bytes), 5)->bytes;
      d.track_names[field(tf, 1)->value] = name;
    }
    if (const Field* te = field(pf, 11)) {
      Event e;
      e.ts = field(pf, 8)->value;
      EXPECT_EQ(field(pf, 10)->value, 1u);  // trusted_packet_sequence_id
      for (const Field& f : fields(te->bytes)) {
        if (f.number == 9) e.type = f.value;
        if (f.number == 11) e.track = f.value;
        if (f.number == 10) e.name = names.at(f.value);
        if (f.number == 47) e.flows.push_back(f.value);
        if (f.number == 48) e.terminating.push_back(f.value);
      }
      d.events.push_back(e);
    }
  }
  return d;
}

constexpr std::uint64_t ms = 1'000'000;

ActionsReport one_process() {
  ActionsReport rep;
  ProcessActions p;
  p.meta.pid = 100;
  p.meta.comm = "python";
  p.actions = {ActionSeries("run_training_epoch"), ActionSeries("training_step")};
  p.intervals = {
      {1, 100, 10 * ms, 20 * ms, false}, {1, 100, 30 * ms, 40 * ms, false}, {0, 100, 5 * ms, 50 * ms, false}};
  rep.processes.push_back(p);
  return rep;
}

}  // namespace

TEST(ProtoEncoder, VarintsAsProtobufWritesThem) {
  EXPECT_EQ(varint_hex(0), "00");
  EXPECT_EQ(varint_hex(1), "01");
  EXPECT_EQ(varint_hex(127), "7f");
  EXPECT_EQ(varint_hex(128), "80 01");
  EXPECT_EQ(varint_hex(150), "96 01");
  EXPECT_EQ(varint_hex(300), "ac 02");
  EXPECT_EQ(varint_hex(16384), "80 80 01");
  EXPECT_EQ(varint_hex(~std::uint64_t{0}), "ff ff ff ff ff ff ff ff ff 01");
}

TEST(ProtoEncoder, FieldsAndLengths) {
  // protobuf.dev/programming-guides/encoding: Test1 {a = 150}, Test2 {b = "testing"}, Test3 {c = Test1}.
  ProtoMessage t1;
  t1.varint(1, 150);
  EXPECT_EQ(hex(t1.data()), "08 96 01");
  ProtoMessage t2;
  t2.bytes(2, "testing");
  EXPECT_EQ(hex(t2.data()), "12 07 74 65 73 74 69 6e 67");
  ProtoMessage t3;
  t3.message(3, t1);
  EXPECT_EQ(hex(t3.data()), "1a 03 08 96 01");
  // int64 -1: ten bytes, two's complement.
  ProtoMessage neg;
  neg.int64(1, -1);
  EXPECT_EQ(hex(neg.data()), "08 ff ff ff ff ff ff ff ff ff 01");
  // fixed64 in field 47 (TrackEvent.flow_ids): tag (47 << 3) | 1 = 377.
  ProtoMessage flow;
  flow.fixed64(47, 0x0102030405060708ull);
  EXPECT_EQ(hex(flow.data()), "f9 02 08 07 06 05 04 03 02 01");
  // A length past 127 takes two bytes; field 60 (TracePacket.track_descriptor) a two-byte tag.
  ProtoMessage big;
  big.bytes(60, std::string(200, 'x'));
  EXPECT_EQ(hex(big.data().substr(0, 4)), "e2 03 c8 01");
  EXPECT_EQ(big.data().size(), 4u + 200u);
}

TEST(ExportRange, ParsesStepsAndWindows) {
  auto s = parse_step_range("2-4");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->first_step, 2u);
  EXPECT_EQ(s->last_step, 4u);
  s = parse_step_range("7");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->first_step, 7u);
  EXPECT_EQ(s->last_step, 7u);
  for (const char* bad : {"", "-", "4-2", "a-b", "1-", "-3", "1--2", "1.5", " 1-2", "1-2x"})
    EXPECT_FALSE(parse_step_range(bad)) << bad;
  auto w = parse_time_window("10,20.5");
  ASSERT_TRUE(w);
  EXPECT_DOUBLE_EQ(w->start_s, 10);
  EXPECT_DOUBLE_EQ(w->end_s, 20.5);
  for (const char* bad : {"", "10", "10,", ",20", "20,10", "5,5", "-1,2", "1,inf", "nan,2", "1;2", "1,2,3"})
    EXPECT_FALSE(parse_time_window(bad)) << bad;
}

TEST(ExportRange, WindowKeepsWhatOverlapsIt) {
  ActionsReport rep = one_process();
  rep.window_begin_ns = 1 * ms;
  // 25..35 ms after the attach at 1 ms: 26..36 ms.
  const RangeFilter r(*parse_time_window("0.025,0.035"), rep);
  EXPECT_FALSE(r.everything());
  EXPECT_FALSE(r.keeps(100, 10 * ms, 20 * ms));  // before
  EXPECT_TRUE(r.keeps(100, 30 * ms, 40 * ms));   // straddles the end: kept whole
  EXPECT_TRUE(r.keeps(100, 5 * ms, 50 * ms));    // encloses it
  EXPECT_FALSE(r.keeps(100, 36 * ms, 37 * ms));  // begins at the end
  EXPECT_TRUE(r.keeps(7, 27 * ms, 27 * ms));     // an instant inside, any process
  EXPECT_FALSE(r.keeps(7, 25 * ms, 25 * ms));
  EXPECT_TRUE(RangeFilter().keeps(1, 0, 0));
}

TEST(PerfettoTrace, SlicesNestStrictlyWithInternedNames) {
  ActionsReport rep = one_process();
  OpsReport ops;
  ops.names = {"aten::mm", ""};
  // The second op's upper-bound end crosses its action's end (20 ms): cut there.
  ops.intervals = {{100, 100, 0, 0, 11 * ms, 12 * ms}, {100, 100, 1, 0, 19 * ms, 22 * ms}};
  std::ostringstream out;
  const PerfettoStats st = write_perfetto_trace(rep, out, &ops);
  const Decoded d = decode(out.str());
  EXPECT_EQ(d.packets, st.packets);
  EXPECT_EQ(st.slices, 5u);
  EXPECT_EQ(st.cut_slices, 1u);
  std::map<std::string, int> begins;
  std::vector<std::uint64_t> open;
  std::uint64_t last_ts = 0;
  for (const Event& e : d.events) {
    EXPECT_GE(e.ts, last_ts);  // one track here: in time order
    last_ts = e.ts;
    if (e.type == 1) {
      ++begins[e.name];
      open.push_back(e.ts);
    } else {
      ASSERT_EQ(e.type, 2u);
      ASSERT_FALSE(open.empty());
      open.pop_back();
    }
  }
  EXPECT_TRUE(open.empty());
  EXPECT_EQ(begins["run_training_epoch"], 1);
  EXPECT_EQ(begins["training_step"], 2);
  EXPECT_EQ(begins["aten::mm"], 1);
  EXPECT_EQ(begins["op#1"], 1);
  // The cut op ends with training_step, at 20 ms: two ends there.
  int at20 = 0;
  for (const Event& e : d.events) at20 += e.type == 2 && e.ts == 20 * ms;
  EXPECT_EQ(at20, 2);
  bool process = false, thread = false;
  for (const auto& [uuid, name] : d.track_names) {
    process |= name == "python";
    thread |= name == "main thread";
  }
  EXPECT_TRUE(process && thread);
}

TEST(PerfettoTrace, KernelsOnStreamTracksWithFlowsFromTheirLaunch) {
  ActionsReport rep = one_process();
  GpuReport gpu;
  gpu.names = {"cudaLaunchKernel", "gemm_kernel"};
  GpuSlice api;
  api.pid = 100;
  api.tid = 100;
  api.kind = LT_GPU_RUNTIME;
  api.begin_ns = 11 * ms;
  api.end_ns = 11 * ms + 5000;
  api.correlation = 42;
  api.name = 0;
  GpuSlice k;
  k.pid = 100;
  k.tid = 100;
  k.kind = LT_GPU_KERNEL;
  k.device = 0;
  k.stream = 7;
  k.begin_ns = 12 * ms;
  k.end_ns = 13 * ms;
  k.correlation = 42;
  k.launch_ns = 11 * ms;
  k.name = 1;
  gpu.slices = {api, k};
  std::ostringstream out;
  write_perfetto_trace(rep, out, nullptr, &gpu);
  const Decoded d = decode(out.str());
  const Event *launch = nullptr, *kernel = nullptr;
  for (const Event& e : d.events) {
    if (e.name == "cudaLaunchKernel") launch = &e;
    if (e.name == "gemm_kernel") kernel = &e;
  }
  ASSERT_TRUE(launch && kernel);
  EXPECT_EQ(d.track_names.at(kernel->track), "GPU 0 stream 7");
  EXPECT_EQ(d.track_names.at(launch->track), "main thread");
  ASSERT_EQ(launch->flows.size(), 1u);
  ASSERT_EQ(kernel->terminating.size(), 1u);
  EXPECT_EQ(launch->flows[0], kernel->terminating[0]);

  // A window before everything keeps nothing.
  rep.window_begin_ns = 0;
  const RangeFilter early(*parse_time_window("0,0.001"), rep);
  std::ostringstream none;
  const PerfettoStats st = write_perfetto_trace(rep, none, nullptr, &gpu, nullptr, &early);
  EXPECT_EQ(st.slices, 0u);
  // A window holding only the launch keeps the kernel with it (by its launch).
  const RangeFilter at_launch(*parse_time_window("0.0105,0.0115"), rep);
  std::ostringstream some;
  write_perfetto_trace(rep, some, nullptr, &gpu, nullptr, &at_launch);
  std::map<std::string, int> kept;
  for (const Event& e : decode(some.str()).events)
    if (e.type == 1) ++kept[e.name];
  EXPECT_EQ(kept["gemm_kernel"], 1);
  EXPECT_EQ(kept["cudaLaunchKernel"], 1);
  EXPECT_EQ(kept["training_step"], 1);  // 10..20 ms overlaps
  EXPECT_EQ(kept["run_training_epoch"], 1);
}

TEST(ExportRange, StepsKeepTheirOwnProcessesSteps) {
  // Two processes, 4 training batches each (fetch, body, end hook), 100 ms
  // apart; the second process's start 50 ms later.
  ActionsReport rep;
  for (std::uint32_t pid : {7u, 8u}) {
    ProcessActions p;
    p.meta.pid = pid;
    p.actions = {ActionSeries("[_TrainingEpochLoop].train_dataloader_next"), ActionSeries("run_training_batch"),
                 ActionSeries("[Callback]TQDMProgressBar.on_train_batch_end")};
    const std::uint64_t off = pid == 8 ? 50 * ms : 0;
    for (std::uint64_t i = 0; i < 4; ++i) {
      const std::uint64_t t = off + i * 100 * ms;
      p.intervals.push_back({0, pid, t, t + 10 * ms, false});
      p.intervals.push_back({1, pid, t + 10 * ms, t + 60 * ms, false});
      p.intervals.push_back({2, pid, t + 60 * ms, t + 61 * ms, false});
    }
    rep.processes.push_back(p);
  }
  const RangeFilter r(*parse_step_range("1-2"), rep);
  EXPECT_NE(r.summary().find("training steps 1-2 of 2 process(es)"), std::string::npos) << r.summary();
  EXPECT_FALSE(r.keeps(7, 0, 61 * ms));          // step 0
  EXPECT_TRUE(r.keeps(7, 100 * ms, 110 * ms));   // step 1's fetch
  EXPECT_TRUE(r.keeps(7, 260 * ms, 261 * ms));   // step 2's end hook
  EXPECT_FALSE(r.keeps(7, 300 * ms, 310 * ms));  // step 3
  EXPECT_FALSE(r.keeps(8, 100 * ms, 110 * ms));  // process 8's step 0 (50-111 ms); its step 1 begins at 150
  EXPECT_TRUE(r.keeps(8, 150 * ms, 160 * ms));
  EXPECT_FALSE(r.keeps(9, 150 * ms, 160 * ms));  // a process with no steps
  const RangeFilter past(*parse_step_range("4-9"), rep);
  EXPECT_TRUE(past.matched_nothing());
  EXPECT_NE(past.summary().find("the trace has 4 training step(s)"), std::string::npos) << past.summary();
  const RangeFilter tail(*parse_step_range("3-9"), rep);  // B past the last: up to the last
  EXPECT_TRUE(tail.keeps(7, 360 * ms, 361 * ms));
  EXPECT_NE(tail.summary().find("training steps 3-9 of 2 process(es) (the trace holds only steps 0-3 of pid 7, 0-3 "
                                "of pid 8)"),
            std::string::npos)
      << tail.summary();
  EXPECT_EQ(r.summary().find("holds only"), std::string::npos) << r.summary();
}
