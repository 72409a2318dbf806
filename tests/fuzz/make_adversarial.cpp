// Writes traces built to be slow to report, for the worst-case timing test
// (tests/integration/test_tracefile.py) and the fuzz corpus:
//   make_adversarial KIND BYTES OUT
// KIND: normal (a plausible job: the baseline), names (every action name
// distinct), unmatched (stops with no start), nesting (one thread opens
// every action, then closes them), codes (a new code object per sample, deep
// stacks), repeat_code (one code object written over and over), ops (op
// names and deep op nesting), gpu (kernel names and launches), pids (a new
// process per action), zstd / zstd_ops (identical deep samples / op entries
// at the highest compression ratio a reader accepts), resync (a damaged chunk followed by fake chunk headers).
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "user/tracefile/trace_format.h"
#include "user/tracefile/trace_writer.h"

using namespace lt;

namespace {

struct Gen {
  tracefile::TraceWriter& w;
  std::uint64_t ts = 1'000'000;
  std::uint64_t rng = 0x9e3779b97f4a7c15ull;
  std::uint64_t next() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  }
  template <class E>
  void put(E& e, std::uint16_t kind, std::uint32_t pid = 1, std::uint32_t tid = 1) {
    e.hdr = {kind, sizeof e, pid, tid, 0, ts += 1000};
    w.append(&e, sizeof e);
  }
  void action(std::uint16_t kind, std::uint64_t key, const std::string& name, std::uint32_t pid = 1,
              std::uint32_t tid = 1) {
    lt_action_event e{};
    e.key = key;
    std::snprintf(e.name, sizeof e.name, "%s", name.c_str());
    e.name_len = static_cast<lt::u32>(name.size());
    put(e, kind, pid, tid);
  }
  void code(std::uint64_t c, const std::string& name, std::uint32_t pid = 1) {
    lt_py_code_event e{};
    e.code = c;
    std::snprintf(e.name, sizeof e.name, "%s", name.c_str());
    std::snprintf(e.file, sizeof e.file, "/src/%s.py", name.c_str());
    e.first_line = 1;
    put(e, LT_EV_PY_CODE, pid);
  }
  void sample(const std::vector<std::uint64_t>& codes, std::uint32_t pid = 1) {
    lt_py_sample_event s{};
    s.nframes = static_cast<lt::u16>(std::min<std::size_t>(codes.size(), LT_STACK_MAX));
    for (unsigned i = 0; i < s.nframes; ++i) s.frames[i].code = codes[i];
    put(s, LT_EV_PY_SAMPLE, pid);
  }
  void preamble() {
    lt_window_event wb{};
    wb.begin = 1;
    put(wb, LT_EV_WINDOW);
    lt_sampler_info_event si{};
    si.rate_hz = 99;
    si.period_ns = 10'101'010;
    si.flags = LT_SAMPLER_ON_CPU;
    put(si, LT_EV_SAMPLER_INFO);
  }
};

void one_round(Gen& g, const std::string& kind, std::uint64_t i) {
  if (kind == "normal") {
    // run_training_batch > training_step, a sample inside, ops.
    g.action(LT_EV_ACTION_BEGIN, 1, "run_training_batch");
    g.action(LT_EV_ACTION_BEGIN, 2, "[LightningModule]Model.training_step");
    lt_op_event op{};
    op.op = static_cast<lt::u32>(i % 8);
    op.depth = 1;
    g.put(op, LT_EV_OP);
    g.sample({0x1000 + i % 16, 0x1000, 0x1001, 0x1002});
    g.action(LT_EV_ACTION_END, 2, "");
    g.action(LT_EV_ACTION_END, 1, "");
  } else if (kind == "names") {
    g.action(LT_EV_ACTION_BEGIN, i, "[Callback]Cb" + std::to_string(g.next()) + ".on_train_batch_end");
    g.action(LT_EV_ACTION_END, i, "");
  } else if (kind == "unmatched") {
    g.action(LT_EV_ACTION_END, g.next(), "");
    lt_action_event e{};
    std::snprintf(e.name, sizeof e.name, "stop%llu", static_cast<unsigned long long>(i % 64));
    g.put(e, LT_EV_DIRECT_STOP);
  } else if (kind == "nesting") {
    g.action(LT_EV_ACTION_BEGIN, i, "level" + std::to_string(i % 32));
    g.sample({0x1000});
  } else if (kind == "codes") {
    std::vector<std::uint64_t> st;
    for (unsigned d = 0; d < LT_STACK_MAX; ++d) st.push_back(0x100000 + (i * 7 + d) % 1'000'000);
    g.code(0x100000 + i % 1'000'000, "f" + std::to_string(i));
    g.sample(st);
  } else if (kind == "repeat_code") {
    g.code(0x1000, "same");
    lt_py_line_event l{};
    l.code = 0x1000;
    l.lasti = static_cast<int>(i % 4);
    l.line = 3;
    g.put(l, LT_EV_PY_LINE);
  } else if (kind == "ops") {
    lt_op_name_event on{};
    on.op = static_cast<lt::u32>(i);
    std::snprintf(on.name, sizeof on.name, "aten::op%llu", static_cast<unsigned long long>(i));
    g.put(on, LT_EV_OP_NAME, 0, 0);
    lt_op_event op{};
    op.op = static_cast<lt::u32>(i);
    op.depth = static_cast<lt::u16>(1 + i % LT_OPS_DEPTH);
    g.put(op, LT_EV_OP);
    if (i % 50 == 0) {
      g.action(LT_EV_ACTION_BEGIN, i, "[LightningModule]Model.training_step");
      g.action(LT_EV_ACTION_END, i, "");
    }
  } else if (kind == "gpu") {
    lt_gpu_name_event gn{};
    gn.n.kind = LT_NAME_KERNEL;
    gn.n.id = static_cast<lt::u32>(i);
    std::snprintf(gn.n.text, sizeof gn.n.text, "_Z6kernel%llu", static_cast<unsigned long long>(i));
    gn.n.len = gn.n.total_len = static_cast<lt::u16>(std::strlen(gn.n.text));
    g.put(gn, LT_EV_GPU_NAME, 1, 9);
    lt_gpu_launch_event gl{};
    gl.correlation = static_cast<lt::u32>(i + 1);
    gl.source = LT_LAUNCH_CUPTI;
    gl.api = LT_API_LAUNCH;
    g.put(gl, LT_EV_GPU_LAUNCH);
    lt_gpu_activity_event ga{};
    ga.a.kind = LT_GPU_KERNEL;
    ga.a.correlation = static_cast<lt::u32>(g.next() % (i + 1) + 1);
    ga.a.name_id = static_cast<lt::u32>(i);
    ga.a.start_ns = g.ts;
    ga.a.end_ns = g.ts + 10;
    g.put(ga, LT_EV_GPU_ACTIVITY, 1, 9);
  } else if (kind == "mem") {
    // Allocations with their stacks (each from another site) in an action,
    // half freed again (CPU frees carry no size), a CUDA allocation with the
    // allocator's totals now and then, and an out-of-memory.
    g.action(LT_EV_ACTION_BEGIN, i, "[LightningModule]Model.training_step");
    lt_mem_event m{};
    m.what = LT_MEM_ALLOC;
    m.ptr = 0x10000 + i * 64;
    m.bytes = static_cast<lt::s64>(64 + i % 4096);
    m.device_index = -1;
    m.flags = LT_MEM_HAS_STACK;
    g.put(m, LT_EV_MEM);
    lt_py_sample_event st{};
    st.nframes = 3;
    st.frames[0].code = 0x100000 + i % 1'000'000;
    st.frames[1].code = 0x1000;
    st.frames[2].code = 0x1001;
    g.put(st, LT_EV_MEM_STACK);
    if (i % 2) {
      lt_mem_event f{};
      f.what = LT_MEM_FREE;
      f.ptr = 0x10000 + (i - 1) * 64;
      f.device_index = -1;
      g.put(f, LT_EV_MEM);
    }
    if (i % 100 == 0) {
      lt_mem_event c{};
      c.what = i % 200 ? LT_MEM_FREE : LT_MEM_ALLOC;
      c.ptr = 0x7f0000000000ull + (i / 200) * 4096;
      c.bytes = i % 200 ? -4096 : 4096;
      c.device_type = 1;
      c.device_index = 0;
      c.flags = LT_MEM_TOTALS_KNOWN;
      c.total_allocated = i % 200 ? 0 : 4096;
      c.total_reserved = 2 << 20;
      g.put(c, LT_EV_MEM);
    }
    if (i % 1000 == 999) {
      lt_mem_event o{};
      o.what = LT_MEM_OOM;
      o.bytes = 1ll << 40;
      o.device_index = -1;
      g.put(o, LT_EV_MEM);
    }
    g.action(LT_EV_ACTION_END, i, "");
  } else if (kind == "comm") {
    // c10d calls in an action, each on another process group and of
    // another size: the per-process rows and groups must stay bounded.
    g.action(LT_EV_ACTION_BEGIN, i, "[LightningModule]Model.training_step");
    lt_comm_event c{};
    c.pg = 0x1000 + i * 64;
    c.seq = i + 1;
    c.kind = static_cast<lt::u8>(1 + i % (LT_COMM_KIND_MAX - 1));
    c.backend = LT_COMM_GLOO;
    c.peer = -1;
    c.ntensors = 1;
    c.flags = LT_COMM_HAS_TENSOR | LT_COMM_HAS_STACK;
    c.impl[2] = 1;        // ndim
    c.impl[3] = 1 + i;    // size
    c.impl[8] = 1;        // stride
    c.impl[14] = 1 + i;   // numel
    c.impl[15] = i % 16;  // dtype
    g.put(c, LT_EV_COMM);
    // ...each with another Python stack (--launch-stacks): rows stay bounded.
    lt_py_sample_event st{};
    st.nframes = 2;
    st.frames[0].code = 0x100000 + i;
    st.frames[1].code = 0x1000;
    g.put(st, LT_EV_COMM_STACK);
    // its timing points, each on another work object: the marks held for
    // the time join must stay bounded too
    lt_comm_mark_event m{};
    m.obj = 0x5000 + i * 64;
    for (lt::u8 w : {LT_COMM_MARK_ENQUEUE, LT_COMM_MARK_WAIT, LT_COMM_MARK_DONE}) {
      m.what = w;
      g.put(m, LT_EV_COMM_MARK);
    }
    // NCCL calls of another size each, and group starts never ended: the
    // rows, groups and threads held for the kernel join stay bounded.
    lt_nccl_event n{};
    n.comm = 0x9000 + i * 64;
    n.count = 1 + i;
    n.dtype = static_cast<lt::u8>(i % 12);
    n.peer = -1;
    for (lt::u8 fn : {LT_NCCL_GROUP_START, LT_NCCL_ALLREDUCE}) {
      n.fn = fn;
      g.put(n, LT_EV_NCCL);
    }
    g.action(LT_EV_ACTION_END, i, "");
  } else if (kind == "pids") {
    const auto pid = static_cast<lt::u32>(100 + i);
    g.action(LT_EV_ACTION_BEGIN, i, "run_training_batch", pid, pid);
    g.sample({0x1000}, pid);
    g.action(LT_EV_ACTION_END, i, "", pid, pid);
  } else if (kind == "resync") {
    lt_action_event e{};
    e.hdr = {LT_EV_ACTION_END, sizeof e, 1, 1, 0, 5};
    g.w.append(&e, sizeof e);
  }
}

// A damaged first chunk, then copies of a header that claims the rest of
// the file as its payload (a wrong checksum) every 40 bytes: a naive
// resynchronisation checksums the rest once per header.
void add_fake_headers(const std::string& out, std::uint64_t bytes) {
  std::ifstream in(out, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), {});
  in.close();
  data[sizeof(tracefile::FileHeader) + 50] ^= 0x5a;
  std::string tail;
  while (tail.size() < bytes) {
    tracefile::ChunkHeader c{};
    c.magic = tracefile::kChunkMagic;
    c.flags = tracefile::kChunkZstd;
    c.raw_size = 1u << 20;
    c.stored_size = static_cast<std::uint32_t>(bytes - tail.size() - sizeof c);
    c.crc32 = 1;
    tail.append(reinterpret_cast<const char*>(&c), sizeof c);
  }
  std::ofstream(out, std::ios::binary | std::ios::trunc) << data << tail;
}

// Chunks written by hand as a crafted file would be: one record repeated
// (a deep stack sample, or a 32-byte op entry), padded with a skippable
// frame to exactly the most a reader accepts (kMaxRatio,
// kMaxRecordsPerByte), not the writer's own bound.
template <class R>
void write_max_ratio(const std::string& out, std::uint64_t bytes, const R& rec) {
  std::vector<char> raw;
  {
    lt_action_event a{};
    a.hdr = {LT_EV_ACTION_BEGIN, sizeof a, 1, 1, 0, 1};
    a.key = 1;
    std::snprintf(a.name, sizeof a.name, "run_training_batch");
    raw.insert(raw.end(), reinterpret_cast<char*>(&a), reinterpret_cast<char*>(&a) + sizeof a);
  }
  std::uint32_t count = 1;
  while (raw.size() + sizeof rec <= (4u << 20)) {
    raw.insert(raw.end(), reinterpret_cast<const char*>(&rec), reinterpret_cast<const char*>(&rec) + sizeof rec);
    ++count;
  }
  std::vector<char> z(ZSTD_compressBound(raw.size()));
  std::size_t n = ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 19);
  const std::size_t target =
      std::max<std::size_t>((raw.size() + tracefile::kMaxRatio - 1) / tracefile::kMaxRatio,
                            (count + tracefile::kMaxRecordsPerByte - 1) / tracefile::kMaxRecordsPerByte);
  z.resize(n);
  if (n + 8 <= target) {
    const std::uint32_t magic = 0x184D2A50, len = static_cast<std::uint32_t>(target - n - 8);
    z.insert(z.end(), reinterpret_cast<const char*>(&magic), reinterpret_cast<const char*>(&magic) + 4);
    z.insert(z.end(), reinterpret_cast<const char*>(&len), reinterpret_cast<const char*>(&len) + 4);
    z.resize(target, 0);
    n = target;
  }
  tracefile::ChunkHeader c{};
  c.magic = tracefile::kChunkMagic;
  c.flags = tracefile::kChunkZstd;
  c.raw_size = static_cast<std::uint32_t>(raw.size());
  c.stored_size = static_cast<std::uint32_t>(n);
  c.record_count = count;
  c.crc32 = static_cast<std::uint32_t>(::crc32(0L, reinterpret_cast<const Bytef*>(z.data()), static_cast<uInt>(n)));
  tracefile::FileHeader fh{};
  std::memcpy(fh.magic, tracefile::kFileMagic, sizeof fh.magic);
  fh.format_major = tracefile::kFormatMajor;
  fh.format_minor = tracefile::kFormatMinor;
  fh.event_abi = LT_EVENT_ABI_VERSION;
  fh.header_size = sizeof fh;
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(&fh), sizeof fh);
  for (std::uint64_t written = sizeof fh; written < bytes; written += sizeof c + n) {
    f.write(reinterpret_cast<const char*>(&c), sizeof c);
    f.write(z.data(), static_cast<std::streamsize>(n));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: make_adversarial KIND BYTES OUT\n");
    return 2;
  }
  const std::string kind = argv[1];
  const std::uint64_t bytes = std::stoull(argv[2]);
  const std::string out = argv[3];
  if (kind == "zstd") {
    lt_py_sample_event smp{};
    smp.hdr = {LT_EV_PY_SAMPLE, sizeof smp, 1, 1, 0, 2};
    smp.nframes = LT_STACK_MAX;
    for (unsigned d = 0; d < LT_STACK_MAX; ++d) smp.frames[d].code = 0x1000 + d;
    write_max_ratio(out, bytes, smp);
    return 0;
  }
  if (kind == "zstd_ops") {
    lt_op_event op{};
    op.hdr = {LT_EV_OP, sizeof op, 1, 1, 0, 2};
    op.depth = 1;
    write_max_ratio(out, bytes, op);
    return 0;
  }
  {
    tracefile::TraceWriter w(out);
    Gen g{w};
    g.preamble();
    // Compressed size grows only at flushes: check often, stop at the size.
    const std::uint64_t budget = kind == "resync" ? 4096 : bytes;
    const std::uint64_t flush_every = bytes < (1u << 20) ? 128 : 4096;  // small seeds: stop near the size
    for (std::uint64_t i = 0; w.bytes_written() < budget; ++i) {
      one_round(g, kind, i);
      if (i % flush_every == flush_every - 1) w.flush();
    }
    lt_window_event we{};
    g.put(we, LT_EV_WINDOW);
    w.close();
  }
  if (kind == "resync") add_fake_headers(out, bytes);
  return 0;
}
