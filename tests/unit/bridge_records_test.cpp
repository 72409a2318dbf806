// The bridge's pure parts: CUPTI activity records -> lt_gpu_activity, name
// interning, name chunks, API classification.
//
// The buffers are real CUPTI format: the CUDA 13 header structs
// (CUpti_ActivityKernel10, Memcpy6, Memset4, API, Synchronization2,
// Overhead3, MemcpyPtoP4) laid end to end, 8-byte aligned, as CUPTI writes
// them.  They are walked with libcupti's own cuptiActivityGetNextRecord when
// libcupti can be dlopen()ed (it can on the CPU-only build machine: the
// iterator needs neither a GPU nor the driver); otherwise with the bridge's
// size-based walker, and the test says which in its output.
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "torchbridge/cupti_records.h"
#include "torchbridge/names.h"

namespace {

using ltb::NameInterner;
using ltb::NextRecordFn;

void* open_cupti() {
  std::vector<std::string> cands;
  if (const char* p = getenv("LTRACE_CUPTI_PATH")) cands.emplace_back(p);
  std::string home = getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
  for (const char* so : {"libcupti.so.13", "libcupti.so"}) {
    cands.push_back(home + "/lib64/" + so);
    cands.push_back(home + "/extras/CUPTI/lib64/" + so);
  }
  for (const std::string& c : cands)
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

// libcupti's iterator, or nullptr.
NextRecordFn real_next() {
  static NextRecordFn fn = [] {
    void* h = open_cupti();
    return h ? reinterpret_cast<NextRecordFn>(dlsym(h, "cuptiActivityGetNextRecord")) : nullptr;
  }();
  return fn;
}

using CallbackNameFn = CUptiResult (*)(CUpti_CallbackDomain, uint32_t, const char**);
CallbackNameFn real_callback_name() {
  static CallbackNameFn fn = [] {
    void* h = open_cupti();
    return h ? reinterpret_cast<CallbackNameFn>(dlsym(h, "cuptiGetCallbackName")) : nullptr;
  }();
  return fn;
}

NextRecordFn walker(const char** which) {
  if (NextRecordFn fn = real_next()) {
    *which = "libcupti cuptiActivityGetNextRecord";
    return fn;
  }
  *which = "size-based walker (libcupti not loadable here)";
  return ltb::next_record_by_size;
}

// A CUPTI activity buffer: records appended back to back.
class Buffer {
 public:
  Buffer() : data_(static_cast<uint8_t*>(aligned_alloc(8, kSize))) { std::memset(data_, 0, kSize); }
  ~Buffer() { free(data_); }
  template <class T>
  T* add(CUpti_ActivityKind kind) {
    static_assert(sizeof(T) % 8 == 0);
    EXPECT_LE(used_ + sizeof(T), kSize);
    auto* p = new (data_ + used_) T;
    std::memset(static_cast<void*>(p), 0, sizeof(T));
    p->kind = kind;
    used_ += sizeof(T);
    return p;
  }
  uint8_t* data() { return data_; }
  size_t used() const { return used_; }

 private:
  static constexpr size_t kSize = 64 * 1024;
  uint8_t* data_;
  size_t used_ = 0;
};

struct Recorder : ltb::ActivitySink {
  std::vector<std::pair<lt::u32, std::string>> names;
  std::vector<std::vector<lt::lt_gpu_activity>> batches;
  std::vector<lt::lt_gpu_activity> all;
  int enriched = 0;
  void name(lt::u32 id, std::string_view text) override { names.emplace_back(id, std::string(text)); }
  void enrich(lt::lt_gpu_activity& a) override {
    ++enriched;
    if (a.kind == LT_GPU_RUNTIME) a.tid = 4242;  // what the bridge does from its callback table
  }
  void activity(const lt::lt_gpu_activity* recs, lt::u32 n) override {
    EXPECT_GE(n, 1u);
    EXPECT_LE(n, static_cast<lt::u32>(LT_GPU_BATCH));
    batches.emplace_back(recs, recs + n);
    all.insert(all.end(), recs, recs + n);
  }
};

constexpr int64_t kOffset = 1'000'000;  // as if CUPTI's clock were 1 ms behind CLOCK_MONOTONIC

const char kKernelA[] = "_Z10vector_addPKfS0_Pfi";
const char kKernelB[] = "_ZN2at6native29vectorized_elementwise_kernelILi4EEEvi";

TEST(BridgeRecords, StructVersionsAreTheCuda13Ones) {
  EXPECT_GE(CUPTI_API_VERSION, 130000);
  EXPECT_EQ(ltb::record_size(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), sizeof(CUpti_ActivityKernel10));
  EXPECT_EQ(ltb::record_size(CUPTI_ACTIVITY_KIND_MEMCPY), sizeof(CUpti_ActivityMemcpy6));
  EXPECT_EQ(ltb::record_size(CUPTI_ACTIVITY_KIND_MEMSET), sizeof(CUpti_ActivityMemset4));
  EXPECT_EQ(ltb::record_size(CUPTI_ACTIVITY_KIND_RUNTIME), sizeof(CUpti_ActivityAPI));
  EXPECT_EQ(ltb::record_size(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION), sizeof(CUpti_ActivitySynchronization2));
  EXPECT_EQ(ltb::record_size(CUPTI_ACTIVITY_KIND_OVERHEAD), sizeof(CUpti_ActivityOverhead3));
  EXPECT_EQ(ltb::record_size(CUPTI_ACTIVITY_KIND_MARKER), 0u);
}

TEST(BridgeRecords, WalkRealFormatBufferAndConvertEveryField) {
  Buffer buf;
  // 1. A kernel.
  auto* k = buf.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k->start = 5'000'000;
  k->end = 5'250'000;
  k->deviceId = 1;
  k->contextId = 3;
  k->streamId = 7;
  k->gridX = 128;
  k->gridY = 2;
  k->gridZ = 1;
  k->blockX = 256;
  k->blockY = 1;
  k->blockZ = 1;
  k->registersPerThread = 40;
  k->staticSharedMemory = 1024;
  k->dynamicSharedMemory = 2048;
  k->correlationId = 42;
  k->name = kKernelA;
  k->graphId = 9;
  // 2. An unknown kind (peer-to-peer copy): skipped.
  auto* p2p = buf.add<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2);
  p2p->bytes = 77;
  p2p->correlationId = 99;
  // 3. Memcpy HtoD.
  auto* m = buf.add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m->bytes = 1 << 20;
  m->start = 4'000'000;
  m->end = 4'100'000;
  m->deviceId = 1;
  m->contextId = 3;
  m->streamId = 7;
  m->correlationId = 41;
  m->graphId = 0;
  // 4. Memset.
  auto* ms = buf.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  ms->value = 0;
  ms->bytes = 4096;
  ms->start = 4'200'000;
  ms->end = 4'201'000;
  ms->deviceId = 1;
  ms->contextId = 3;
  ms->streamId = 8;
  ms->correlationId = 43;
  ms->graphId = 5;
  // 5. The nested driver call of the runtime launch below (same correlation):
  //    written first because it ends first; dropped.
  auto* dn = buf.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  dn->cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  dn->start = 4'900'100;
  dn->end = 4'900'900;
  dn->correlationId = 42;
  // 6. The runtime launch.
  auto* rt = buf.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  rt->cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  rt->start = 4'900'000;
  rt->end = 4'901'000;
  rt->processId = 1234;
  rt->threadId = 0xdeadbeef;  // a pthread id, not a kernel tid: not used
  rt->correlationId = 42;
  rt->returnValue = 0;
  // 7. A driver call of its own (kept).
  auto* dr = buf.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  dr->cbid = CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize;
  dr->start = 6'000'000;
  dr->end = 6'500'000;
  dr->correlationId = 50;
  // 8. Synchronisation.
  auto* sy = buf.add<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  sy->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sy->start = 5'300'000;
  sy->end = 5'400'000;
  sy->correlationId = 45;
  sy->contextId = 3;
  sy->streamId = 7;
  // 9. CUPTI overhead.
  auto* ov = buf.add<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD);
  ov->overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  ov->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  ov->start = 7'000'000;
  ov->end = 7'000'500;
  // 10-12. Kernels: same pointer; another pointer with the same text; a new
  //        name with no timing (start 0 stays 0).
  auto* k2 = buf.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k2->name = kKernelA;
  k2->correlationId = 60;
  k2->start = 8'000'000;
  k2->end = 8'000'010;
  std::string copy_of_a = kKernelA;
  auto* k3 = buf.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_KERNEL);
  k3->name = copy_of_a.c_str();
  k3->correlationId = 61;
  auto* k4 = buf.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k4->name = kKernelB;
  k4->correlationId = 62;
  k4->gridX = -1;  // never negative in practice; clamped

  const char* which = nullptr;
  NextRecordFn next = walker(&which);
  RecordProperty("walker", which);
  std::printf("[ walker   ] %s\n", which);

  NameInterner names;
  Recorder rec;
  ltb::WalkStats ws = ltb::walk_activity_buffer(buf.data(), buf.used(), next, names, kOffset, rec);
  EXPECT_EQ(ws.end, CUPTI_ERROR_MAX_LIMIT_REACHED);
  EXPECT_EQ(ws.records, 12u);
  EXPECT_EQ(ws.skipped, 1u);
  EXPECT_EQ(ws.nested_driver, 1u);
  EXPECT_EQ(ws.converted, 10u);
  EXPECT_EQ(ws.batches, 1u);
  ASSERT_EQ(rec.all.size(), 10u);
  EXPECT_EQ(rec.enriched, 10);

  // Names: each text announced once, before its first record.
  ASSERT_EQ(rec.names.size(), 2u);
  EXPECT_EQ(rec.names[0], std::make_pair(1u, std::string(kKernelA)));
  EXPECT_EQ(rec.names[1], std::make_pair(2u, std::string(kKernelB)));

  // Records in buffer order, driver records last.
  const lt::lt_gpu_activity& ka = rec.all[0];
  EXPECT_EQ(ka.kind, LT_GPU_KERNEL);
  EXPECT_EQ(ka.start_ns, 5'000'000u + kOffset);
  EXPECT_EQ(ka.end_ns, 5'250'000u + kOffset);
  EXPECT_EQ(ka.bytes, 0u);
  EXPECT_EQ(ka.correlation, 42u);
  EXPECT_EQ(ka.name_id, 1u);
  EXPECT_EQ(ka.cbid, 0u);
  EXPECT_EQ(ka.tid, 0u);
  EXPECT_EQ(ka.stream, 7u);
  EXPECT_EQ(ka.context, 3u);
  EXPECT_EQ(ka.grid[0], 128u);
  EXPECT_EQ(ka.grid[1], 2u);
  EXPECT_EQ(ka.grid[2], 1u);
  EXPECT_EQ(ka.block[0], 256u);
  EXPECT_EQ(ka.block[1], 1u);
  EXPECT_EQ(ka.block[2], 1u);
  EXPECT_EQ(ka.registers, 40u);
  EXPECT_EQ(ka.shared_mem, 3072u);
  EXPECT_EQ(ka.graph_id, 9u);
  EXPECT_EQ(ka.device, 1u);
  EXPECT_EQ(ka.copy_kind, 0u);
  EXPECT_EQ(ka.sync_type, 0u);
  EXPECT_EQ(ka.pad, 0u);
  EXPECT_EQ(ka.pad2, 0u);

  const lt::lt_gpu_activity& mc = rec.all[1];
  EXPECT_EQ(mc.kind, LT_GPU_MEMCPY);
  EXPECT_EQ(mc.start_ns, 4'000'000u + kOffset);
  EXPECT_EQ(mc.end_ns, 4'100'000u + kOffset);
  EXPECT_EQ(mc.bytes, 1u << 20);
  EXPECT_EQ(mc.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(mc.copy_kind, 1u);
  EXPECT_EQ(mc.correlation, 41u);
  EXPECT_EQ(mc.stream, 7u);
  EXPECT_EQ(mc.context, 3u);
  EXPECT_EQ(mc.device, 1u);
  EXPECT_EQ(mc.name_id, 0u);
  EXPECT_EQ(mc.graph_id, 0u);

  const lt::lt_gpu_activity& me = rec.all[2];
  EXPECT_EQ(me.kind, LT_GPU_MEMSET);
  EXPECT_EQ(me.start_ns, 4'200'000u + kOffset);
  EXPECT_EQ(me.end_ns, 4'201'000u + kOffset);
  EXPECT_EQ(me.bytes, 4096u);
  EXPECT_EQ(me.correlation, 43u);
  EXPECT_EQ(me.stream, 8u);
  EXPECT_EQ(me.context, 3u);
  EXPECT_EQ(me.device, 1u);
  EXPECT_EQ(me.graph_id, 5u);

  const lt::lt_gpu_activity& ra = rec.all[3];
  EXPECT_EQ(ra.kind, LT_GPU_RUNTIME);
  EXPECT_EQ(ra.start_ns, 4'900'000u + kOffset);
  EXPECT_EQ(ra.end_ns, 4'901'000u + kOffset);
  EXPECT_EQ(ra.cbid, static_cast<lt::u32>(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_EQ(ra.correlation, 42u);
  EXPECT_EQ(ra.tid, 4242u);  // from enrich(), never CUPTI's pthread id
  EXPECT_EQ(ra.name_id, 0u);

  const lt::lt_gpu_activity& sa = rec.all[4];
  EXPECT_EQ(sa.kind, LT_GPU_SYNC);
  EXPECT_EQ(sa.start_ns, 5'300'000u + kOffset);
  EXPECT_EQ(sa.end_ns, 5'400'000u + kOffset);
  EXPECT_EQ(sa.sync_type, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
  EXPECT_EQ(sa.correlation, 45u);
  EXPECT_EQ(sa.stream, 7u);
  EXPECT_EQ(sa.context, 3u);

  const lt::lt_gpu_activity& oa = rec.all[5];
  EXPECT_EQ(oa.kind, LT_GPU_OVERHEAD);
  EXPECT_EQ(oa.start_ns, 7'000'000u + kOffset);
  EXPECT_EQ(oa.end_ns, 7'000'500u + kOffset);
  EXPECT_EQ(oa.cbid, static_cast<lt::u32>(CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH));

  EXPECT_EQ(rec.all[6].kind, LT_GPU_KERNEL);
  EXPECT_EQ(rec.all[6].name_id, 1u);  // same pointer
  EXPECT_EQ(rec.all[6].correlation, 60u);
  EXPECT_EQ(rec.all[7].kind, LT_GPU_KERNEL);  // CUPTI_ACTIVITY_KIND_KERNEL: same struct
  EXPECT_EQ(rec.all[7].name_id, 1u);          // other pointer, same text
  EXPECT_EQ(rec.all[7].start_ns, 0u);         // no timing stays no timing
  EXPECT_EQ(rec.all[7].end_ns, 0u);
  EXPECT_EQ(rec.all[8].name_id, 2u);
  EXPECT_EQ(rec.all[8].grid[0], 0u);

  const lt::lt_gpu_activity& da = rec.all[9];
  EXPECT_EQ(da.kind, LT_GPU_DRIVER);
  EXPECT_EQ(da.cbid, static_cast<lt::u32>(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize));
  EXPECT_EQ(da.correlation, 50u);
  EXPECT_EQ(da.start_ns, 6'000'000u + kOffset);
  EXPECT_EQ(da.end_ns, 6'500'000u + kOffset);

  // A second buffer with the same kernels announces nothing new.
  Recorder again;
  ltb::walk_activity_buffer(buf.data(), buf.used(), next, names, kOffset, again);
  EXPECT_TRUE(again.names.empty());
  EXPECT_EQ(again.all.size(), 10u);
}

TEST(BridgeRecords, NegativeOffsetAndUnknownKinds) {
  NameInterner names;
  CUpti_ActivityAPI api;
  std::memset(&api, 0, sizeof api);
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.start = 1'700'000'000'000'000'000ull;  // CUPTI's CLOCK_REALTIME
  api.end = api.start + 10;
  lt::lt_gpu_activity out;
  std::memset(&out, 0xab, sizeof out);
  ASSERT_TRUE(ltb::to_lt_activity(reinterpret_cast<CUpti_Activity*>(&api), names, &out, -1'699'000'000'000'000'000ll));
  EXPECT_EQ(out.start_ns, 1'000'000'000'000'000ull);
  EXPECT_EQ(out.end_ns, 1'000'000'000'000'010ull);

  lt::lt_gpu_activity untouched;
  std::memset(&untouched, 0x5a, sizeof untouched);
  lt::lt_gpu_activity o2 = untouched;
  CUpti_ActivityMemcpyPtoP4 p2p;
  std::memset(&p2p, 0, sizeof p2p);
  p2p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  EXPECT_FALSE(ltb::to_lt_activity(reinterpret_cast<CUpti_Activity*>(&p2p), names, &o2, 0));
  EXPECT_EQ(std::memcmp(&o2, &untouched, sizeof o2), 0);
  CUpti_Activity marker{CUPTI_ACTIVITY_KIND_MARKER};
  EXPECT_FALSE(ltb::to_lt_activity(&marker, names, &o2, 0));
  EXPECT_FALSE(ltb::to_lt_activity(nullptr, names, &o2, 0));
  EXPECT_EQ(names.size(), 0u);
}

TEST(BridgeRecords, BatchesOfAtMost32ConsecutiveRecords) {
  Buffer buf;
  for (int i = 0; i < 70; ++i) {
    auto* k = buf.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    k->name = kKernelB;
    k->correlationId = 1000 + i;
    k->start = 10 + i;
    k->end = 20 + i;
  }
  const char* which = nullptr;
  NameInterner names;
  Recorder rec;
  ltb::WalkStats ws = ltb::walk_activity_buffer(buf.data(), buf.used(), walker(&which), names, 0, rec);
  EXPECT_EQ(ws.records, 70u);
  ASSERT_EQ(rec.batches.size(), 3u);
  EXPECT_EQ(rec.batches[0].size(), 32u);
  EXPECT_EQ(rec.batches[1].size(), 32u);
  EXPECT_EQ(rec.batches[2].size(), 6u);
  for (size_t i = 0; i < rec.all.size(); ++i) EXPECT_EQ(rec.all[i].correlation, 1000u + i);
  EXPECT_EQ(rec.names.size(), 1u);
}

TEST(BridgeRecords, SizeWalkerAgreesWithLibcupti) {
  NextRecordFn real = real_next();
  if (real == nullptr) GTEST_SKIP() << "libcupti not loadable here";
  Buffer buf;
  buf.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  buf.add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  buf.add<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2);
  buf.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  buf.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  buf.add<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  buf.add<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD);
  std::vector<const void*> a, b;
  CUpti_Activity* r = nullptr;
  CUptiResult end_real, end_size;
  while ((end_real = real(buf.data(), buf.used(), &r)) == CUPTI_SUCCESS) a.push_back(r);
  r = nullptr;
  while ((end_size = ltb::next_record_by_size(buf.data(), buf.used(), &r)) == CUPTI_SUCCESS) b.push_back(r);
  EXPECT_EQ(a.size(), 7u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(end_real, CUPTI_ERROR_MAX_LIMIT_REACHED);
  EXPECT_EQ(end_size, CUPTI_ERROR_MAX_LIMIT_REACHED);
}

TEST(BridgeNames, InternByPointerAndText) {
  NameInterner n;
  EXPECT_EQ(n.intern(nullptr).id, 0u);
  char a[] = "kernel_a";
  std::string a2 = "kernel_a";
  char b[] = "kernel_b";
  auto r1 = n.intern(a);
  EXPECT_EQ(r1.id, 1u);
  EXPECT_TRUE(r1.fresh);
  auto r2 = n.intern(a);
  EXPECT_EQ(r2.id, 1u);
  EXPECT_FALSE(r2.fresh);
  auto r3 = n.intern(a2.c_str());
  EXPECT_EQ(r3.id, 1u);
  EXPECT_FALSE(r3.fresh);
  auto r4 = n.intern(b);
  EXPECT_EQ(r4.id, 2u);
  EXPECT_TRUE(r4.fresh);
  // The same pointer later holding another name (CUPTI released and taken
  // again): the text decides.
  std::strcpy(a, "kernel_c");
  auto r5 = n.intern(a);
  EXPECT_EQ(r5.id, 3u);
  EXPECT_TRUE(r5.fresh);
  EXPECT_EQ(n.text(1), "kernel_a");
  EXPECT_EQ(n.text(3), "kernel_c");
  EXPECT_EQ(n.text(0), "");
  EXPECT_EQ(n.text(99), "");
  EXPECT_EQ(n.intern_text("kernel_b").id, 2u);
  std::vector<std::string> order;
  n.for_each([&](lt::u32 id, std::string_view t) { order.push_back(std::to_string(id) + "=" + std::string(t)); });
  EXPECT_EQ(order, (std::vector<std::string>{"1=kernel_a", "2=kernel_b", "3=kernel_c"}));
}

std::vector<lt::lt_gpu_name> chunks_of(std::string_view text, lt::u16 kind = LT_NAME_KERNEL, lt::u32 id = 7) {
  std::vector<lt::lt_gpu_name> out;
  ltb::split_name(
      kind, id, text,
      [](const lt::lt_gpu_name& c, void* ctx) { static_cast<std::vector<lt::lt_gpu_name>*>(ctx)->push_back(c); }, &out);
  return out;
}

TEST(BridgeNames, LongNamesAreSplitIntoChunks) {
  static_assert(LT_GPU_NAME_CHUNK == 232);
  std::string name;
  for (int i = 0; name.size() < 600; ++i) name += "_ZN5cutlass6KernelI" + std::to_string(i);
  name.resize(600);
  auto c = chunks_of(name, LT_NAME_KERNEL, 7);
  ASSERT_EQ(c.size(), 3u);
  std::string joined;
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].id, 7u);
    EXPECT_EQ(c[i].kind, LT_NAME_KERNEL);
    EXPECT_EQ(c[i].total_len, 600u);
    EXPECT_EQ(c[i].offset, i * 232);
    joined.append(c[i].text, c[i].len);
  }
  EXPECT_EQ(c[0].len, 232u);
  EXPECT_EQ(c[1].len, 232u);
  EXPECT_EQ(c[2].len, 136u);
  EXPECT_EQ(joined, name);
  // Unused bytes of the last chunk are zero (the whole body is copied).
  for (size_t i = c[2].len; i < LT_GPU_NAME_CHUNK; ++i) EXPECT_EQ(c[2].text[i], 0);

  EXPECT_EQ(chunks_of(std::string(232, 'x')).size(), 1u);
  EXPECT_EQ(chunks_of(std::string(233, 'x')).size(), 2u);
  EXPECT_EQ(chunks_of(std::string(233, 'x'))[1].len, 1u);
  auto empty = chunks_of("");
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0].len, 0u);
  EXPECT_EQ(empty[0].total_len, 0u);
  auto huge = chunks_of(std::string(ltb::kNameMax + 5000, 'y'), LT_NAME_NVTX_STRING, 3);
  EXPECT_EQ(huge.front().total_len, ltb::kNameMax);
  EXPECT_EQ(huge.back().offset + huge.back().len, ltb::kNameMax);
  EXPECT_EQ(huge.front().kind, LT_NAME_NVTX_STRING);
}

TEST(BridgeNames, ApiNames) {
  EXPECT_EQ(ltb::display_api_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(ltb::display_api_name("cudaLaunchKernel_ptsz_v7000"), "cudaLaunchKernel_ptsz");
  EXPECT_EQ(ltb::display_api_name("cudaLaunchKernelExC_v11060"), "cudaLaunchKernelExC");
  EXPECT_EQ(ltb::display_api_name("cuMemcpyHtoD_v2"), "cuMemcpyHtoD_v2");
  EXPECT_EQ(ltb::display_api_name("cuLaunchKernel"), "cuLaunchKernel");
  EXPECT_EQ(ltb::api_base_name("cuMemcpyHtoDAsync_v2_ptsz"), "cuMemcpyHtoDAsync");
  EXPECT_EQ(ltb::api_base_name("cudaStreamSynchronize_ptsz_v7000"), "cudaStreamSynchronize");
  EXPECT_EQ(ltb::api_base_name("cuCtxSynchronize_v2"), "cuCtxSynchronize");
}

TEST(BridgeApi, ClassifyByName) {
  const auto R = CUPTI_CB_DOMAIN_RUNTIME_API;
  const auto D = CUPTI_CB_DOMAIN_DRIVER_API;
  EXPECT_EQ(ltb::classify_api(R, "cudaLaunchKernel_v7000"), LT_API_LAUNCH);
  EXPECT_EQ(ltb::classify_api(R, "cudaLaunchKernel_ptsz_v7000"), LT_API_LAUNCH);
  EXPECT_EQ(ltb::classify_api(R, "cudaLaunchKernelExC_v11060"), LT_API_LAUNCH);
  EXPECT_EQ(ltb::classify_api(R, "cudaLaunchCooperativeKernel_v9000"), LT_API_LAUNCH);
  EXPECT_EQ(ltb::classify_api(R, "cudaGraphLaunch_ptsz_v10000"), LT_API_GRAPH_LAUNCH);
  EXPECT_EQ(ltb::classify_api(R, "cudaMemcpyAsync_v3020"), LT_API_MEMCPY);
  EXPECT_EQ(ltb::classify_api(R, "cudaMemcpy2DAsync_ptsz_v7000"), LT_API_MEMCPY);
  EXPECT_EQ(ltb::classify_api(R, "cudaMemsetAsync_v3020"), LT_API_MEMSET);
  EXPECT_EQ(ltb::classify_api(R, "cudaDeviceSynchronize_v3020"), LT_API_SYNC);
  EXPECT_EQ(ltb::classify_api(R, "cudaStreamSynchronize_ptsz_v7000"), LT_API_SYNC);
  EXPECT_EQ(ltb::classify_api(R, "cudaEventSynchronize_v3020"), LT_API_SYNC);
  EXPECT_EQ(ltb::classify_api(R, "cudaMalloc_v3020"), 0);
  EXPECT_EQ(ltb::classify_api(R, "cudaLaunchHostFunc_v10000"), 0);
  EXPECT_EQ(ltb::classify_api(R, "cudaStreamWaitEvent_v3020"), 0);
  EXPECT_EQ(ltb::classify_api(R, "cudaGetDevice_v3020"), 0);
  EXPECT_EQ(ltb::classify_api(D, "cuLaunchKernel"), LT_API_LAUNCH);
  EXPECT_EQ(ltb::classify_api(D, "cuLaunchKernel_ptsz"), LT_API_LAUNCH);
  EXPECT_EQ(ltb::classify_api(D, "cuLaunchKernelEx_ptsz"), LT_API_LAUNCH);
  EXPECT_EQ(ltb::classify_api(D, "cuLaunchCooperativeKernel_ptsz"), LT_API_LAUNCH);
  EXPECT_EQ(ltb::classify_api(D, "cuGraphLaunch_ptsz"), LT_API_GRAPH_LAUNCH);
  EXPECT_EQ(ltb::classify_api(D, "cuMemcpyHtoDAsync_v2_ptsz"), LT_API_MEMCPY);
  EXPECT_EQ(ltb::classify_api(D, "cuMemsetD32Async"), LT_API_MEMSET);
  EXPECT_EQ(ltb::classify_api(D, "cuCtxSynchronize_v2"), LT_API_SYNC);
  EXPECT_EQ(ltb::classify_api(D, "cuStreamSynchronize_ptsz"), LT_API_SYNC);
  EXPECT_EQ(ltb::classify_api(D, "cuEventSynchronize"), LT_API_SYNC);
  EXPECT_EQ(ltb::classify_api(D, "cuLaunchHostFunc"), 0);
  EXPECT_EQ(ltb::classify_api(D, "cuLaunchGrid"), 0);
  EXPECT_EQ(ltb::classify_api(D, "cuMemAlloc_v2"), 0);
  EXPECT_EQ(ltb::classify_api(D, "cuMemsetAccess"), 0);  // not cuMemsetD*
  EXPECT_EQ(ltb::classify_api(CUPTI_CB_DOMAIN_NVTX, "nvtxRangePushA"), 0);
}

// The names libcupti really gives the callback ids the bridge must report.
TEST(BridgeApi, ClassifyLibcuptiCallbackNames) {
  CallbackNameFn name_of = real_callback_name();
  if (name_of == nullptr) GTEST_SKIP() << "libcupti not loadable here";
  auto cls = [&](CUpti_CallbackDomain d, uint32_t cbid) {
    const char* n = nullptr;
    EXPECT_EQ(name_of(d, cbid, &n), CUPTI_SUCCESS) << cbid;
    return n ? ltb::classify_api(d, n) : lt::u16{0};
  };
  const auto R = CUPTI_CB_DOMAIN_RUNTIME_API;
  const auto D = CUPTI_CB_DOMAIN_DRIVER_API;
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000), LT_API_LAUNCH);
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000), LT_API_LAUNCH);
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060), LT_API_LAUNCH);
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000), LT_API_LAUNCH);
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000), LT_API_GRAPH_LAUNCH);
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020), LT_API_MEMCPY);
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020), LT_API_MEMSET);
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020), LT_API_SYNC);
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020), LT_API_SYNC);
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020), LT_API_SYNC);
  EXPECT_EQ(cls(R, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020), 0);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel), LT_API_LAUNCH);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz), LT_API_LAUNCH);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx), LT_API_LAUNCH);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz), LT_API_LAUNCH);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel), LT_API_LAUNCH);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch), LT_API_GRAPH_LAUNCH);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz), LT_API_GRAPH_LAUNCH);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2), LT_API_MEMCPY);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2), LT_API_MEMSET);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize), LT_API_SYNC);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize), LT_API_SYNC);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize), LT_API_SYNC);
  EXPECT_EQ(cls(D, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2), 0);
  // How many callback ids the bridge enables.
  std::map<lt::u16, int> count;
  for (auto d : {R, D})
    for (uint32_t cbid = 1; cbid < 2048; ++cbid) {
      const char* n = nullptr;
      if (name_of(d, cbid, &n) == CUPTI_SUCCESS && n) count[ltb::classify_api(d, n)]++;
    }
  std::printf("[ cbids    ] launch %d, graph launch %d, sync %d, memcpy %d, memset %d\n", count[LT_API_LAUNCH],
              count[LT_API_GRAPH_LAUNCH], count[LT_API_SYNC], count[LT_API_MEMCPY], count[LT_API_MEMSET]);
  EXPECT_GE(count[LT_API_LAUNCH], 14);
  EXPECT_GE(count[LT_API_GRAPH_LAUNCH], 2);
  EXPECT_GE(count[LT_API_SYNC], 8);
}

}  // namespace
