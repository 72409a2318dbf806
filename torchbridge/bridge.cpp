// The bridge's life: how it is started, the poll thread, CUPTI on the rising
// edge of ltrace:session's semaphore and off again on the falling edge.
//
// Started by
//   (a) InitializeInjection(), which the CUDA driver calls during cuInit when
//       CUDA_INJECTION64_PATH names this library;
//   (b) InitializeInjectionNvtx2() (nvtx.cpp) for NVTX_INJECTION64_PATH:
//       NVTX callbacks only, no thread;
//   (c) dlopen() into a running process (a ptrace injector): the constructor
//       sees that neither variable names this library and takes the late
//       path (LT_BRIDGE_F_LATE); ltrace_bridge_late_init() does the same.
//
// Dormant (ltrace_session_semaphore == 0): no CUPTI subscription (CUPTI has
// one subscriber slot; taking it would break torch.profiler / kineto with
// error 39), nothing enabled.  The thread "ltrace-bridge" reads the semaphore
// every 100 ms; that is the whole cost.
//
// Rising edge: find and dlopen libcupti, cuptiSubscribe, enable the API
// callbacks (ltrace:launch) and the activity kinds, map CUPTI's clock to
// CLOCK_MONOTONIC, status ACTIVE, replay every known name.  While active the
// thread flushes CUPTI's buffers every 100 ms (records reach the tracer
// within ~0.2 s) and reports dropped records.
//
// Falling edge (the tracer drops ltrace:session first and keeps the other
// probes until it sees DORMANT): forced flush, emit, disable everything,
// cuptiUnsubscribe (kineto may subscribe again), status DORMANT.
#include "torchbridge/bridge.h"

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "torchbridge/cupti_api.h"
#include "torchbridge/cupti_records.h"
#include "torchbridge/names.h"
#include "torchbridge/nvtx.h"
#include "torchbridge/op_observer.h"
#include "torchbridge/probes.h"
#include "torchbridge/util.h"

namespace ltb {
namespace {

constexpr size_t kBufferSize = 1 << 20;  // CUPTI activity buffers: 1 MiB
constexpr uint64_t kPollNs = 100'000'000;
constexpr uint64_t kClockEveryNs = 10'000'000'000ull;
constexpr uint32_t kMaxCbid = 2048;  // callback ids the tables cover
constexpr uint32_t kTidSlots = 8192;

constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
};

const char* kind_label(CUpti_ActivityKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return "KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return "MEMSET";
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return "DRIVER";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return "SYNC";
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return "OVERHEAD";
    default:
      return "?";
  }
}

// ---- state read by callbacks on any thread (trivially destructible) ----
std::atomic<bool> g_thread_started{false};
std::atomic<bool> g_exiting{false};
std::atomic<bool> g_active{false};         // subscribed, activity on: CUPTI gets buffers
std::atomic<bool> g_ts_mono{false};        // our timestamp callback returns CLOCK_MONOTONIC
std::atomic<int64_t> g_ts_offset{0};       // added to every CUPTI timestamp
std::atomic<uint32_t> g_flags{0};          // LT_BRIDGE_F_*
std::atomic<bool> g_driver_mode{false};    // InitializeInjection ran: CUDA is up
std::atomic<bool> g_cupti_tainted{false};  // fork child of a subscribed parent: never touch CUPTI

// Callback id -> LT_API_* (0 = not reported), per domain; written once
// before the first cuptiSubscribe, read-only afterwards.
lt::u8 g_class[2][kMaxCbid];
std::atomic<bool> g_tables_built{false};
// API names announced in this session.
std::atomic<lt::u8> g_api_announced[2][kMaxCbid];

// correlation -> kernel tid of the thread that made the call (the slot keeps
// the latest correlation that hashed there).
std::atomic<uint64_t> g_tid_slots[kTidSlots];

// Per thread: inside a reported runtime call (its driver calls are not
// reported again).
thread_local uint32_t t_rt_depth = 0;
thread_local uint32_t t_rt_corr = 0;

int dom_index(CUpti_CallbackDomain d) {
  return d == CUPTI_CB_DOMAIN_DRIVER_API ? 1 : 0;
}

// ---- state owned by the poll thread (under State::mu) ----
struct State {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  std::mutex walk_mu;  // one buffer walk at a time
  CuptiApi api;
  CUpti_SubscriberHandle sub = nullptr;
  bool attached_seen = false;   // the poll thread's view of ltrace:session
  bool waiting_driver = false;  // late path: libcuda not in the process yet
  std::vector<CUpti_ActivityKind> enabled;
  uint64_t last_clock_ns = 0;
  uint64_t dropped_total = 0;
  bool devices_known = false;
  std::vector<std::string> devices;
  std::vector<std::string> api_names[2];  // display names by cbid
  NameInterner kernels;
  bool atexit_registered = false;
};

// Never destroyed: the poll thread and CUPTI's threads may still run while
// the process exits and static destructors run.
State& st() {
  static State* s = new State;
  return *s;
}

// ---- CUPTI callbacks ----

void note_tid(uint32_t corr) {
  g_tid_slots[corr & (kTidSlots - 1)].store((static_cast<uint64_t>(corr) << 32) | current_tid(),
                                            std::memory_order_relaxed);
}

lt::u32 tid_of(uint32_t corr) {
  if (corr == 0) return 0;
  uint64_t v = g_tid_slots[corr & (kTidSlots - 1)].load(std::memory_order_relaxed);
  return (v >> 32) == corr ? static_cast<lt::u32>(v) : 0;
}

void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) noexcept {
  if ((domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) || cbid >= kMaxCbid ||
      data == nullptr)
    return;
  lt::u8 cls = g_class[dom_index(domain)][cbid];
  if (cls == 0) return;
  auto* cd = static_cast<const CUpti_CallbackData*>(data);
  uint32_t corr = cd->correlationId;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (cd->callbackSite == CUPTI_API_ENTER) {
      ++t_rt_depth;
      t_rt_corr = corr;
      note_tid(corr);
      if (probe::launch_on()) probe::fire_launch(corr, cbid, cls);
    } else if (t_rt_depth > 0) {
      --t_rt_depth;
    }
    return;
  }
  if (cd->callbackSite != CUPTI_API_ENTER) return;
  note_tid(corr);
  if (t_rt_depth > 0 || corr == t_rt_corr) return;  // made by the runtime call already reported
  if (probe::launch_on()) probe::fire_launch(corr, cbid, cls | kApiDriverFlag);
}

uint64_t CUPTIAPI timestamp_cb() {
  // CUPTI's own clock on Linux is CLOCK_REALTIME: what another client that
  // subscribes after we leave (and does not register its own callback) gets.
  return g_ts_mono.load(std::memory_order_relaxed) ? mono_ns() : realtime_ns();
}

void announce_api(CUpti_CallbackDomain domain, lt::u32 cbid) {
  if (!probe::name_on() || cbid >= kMaxCbid || !g_tables_built.load(std::memory_order_acquire)) return;
  int d = dom_index(domain);
  if (g_api_announced[d][cbid].exchange(1, std::memory_order_relaxed)) return;
  const std::vector<std::string>& names = st().api_names[d];
  if (cbid < names.size() && !names[cbid].empty())
    probe::emit_name(d ? LT_NAME_DRIVER_API : LT_NAME_RUNTIME_API, cbid, names[cbid]);
}

class Sink final : public ActivitySink {
 public:
  void name(lt::u32 id, std::string_view text) override { probe::emit_name(LT_NAME_KERNEL, id, text); }
  void enrich(lt::lt_gpu_activity& a) override {
    if (a.kind == LT_GPU_RUNTIME || a.kind == LT_GPU_DRIVER || a.kind == LT_GPU_SYNC) a.tid = tid_of(a.correlation);
    if (a.kind == LT_GPU_RUNTIME) announce_api(CUPTI_CB_DOMAIN_RUNTIME_API, a.cbid);
    if (a.kind == LT_GPU_DRIVER) announce_api(CUPTI_CB_DOMAIN_DRIVER_API, a.cbid);
  }
  void activity(const lt::lt_gpu_activity* recs, lt::u32 count) override {
    if (probe::activity_on()) probe::fire_activity(recs, count);
  }
};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) noexcept {
  *max_records = 0;
  *buffer = nullptr;
  *size = 0;
  // Dormant: no buffer, CUPTI drops the records (it should have none).
  if (!g_active.load(std::memory_order_acquire)) return;
  void* p = aligned_alloc(8, kBufferSize);
  if (p == nullptr) return;
  *buffer = static_cast<uint8_t*>(p);
  *size = kBufferSize;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) noexcept {
  try {
    if (buffer != nullptr && valid > 0 && probe::activity_on() && !g_cupti_tainted.load()) {
      State& s = st();
      if (s.api.ActivityGetNextRecord != nullptr) {
        std::lock_guard<std::mutex> lock(s.walk_mu);
        Sink sink;
        WalkStats ws = walk_activity_buffer(buffer, valid, s.api.ActivityGetNextRecord, s.kernels,
                                            g_ts_offset.load(std::memory_order_relaxed), sink);
        debug("buffer: %zu records, %zu sent in %zu batches, %zu skipped, %zu nested driver", ws.records, ws.converted,
              ws.batches, ws.skipped, ws.nested_driver);
      }
    }
  } catch (...) {
  }
  free(buffer);
}

// ---- the poll thread's work (State::mu held) ----

void status(lt::u32 state, lt::s32 error, lt::u64 dropped, const std::string& detail) {
  uint32_t version = 0;
  State& s = st();
  // No CUPTI call before the driver is in the process: without it some
  // libcupti builds (PyPI's 13.2) recurse in their lazy init until the stack
  // overflows, even for cuptiGetVersion.
  if (s.api.GetVersion != nullptr && (g_driver_mode.load() || cuda_driver_loaded())) s.api.GetVersion(&version);
  probe::emit_status(state, error, dropped, version, g_flags.load(), detail);
}

void build_tables(State& s) {
  if (g_tables_built.load(std::memory_order_acquire)) return;
  const CUpti_CallbackDomain doms[2] = {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API};
  for (int d = 0; d < 2; ++d) {
    s.api_names[d].assign(kMaxCbid, std::string());
    for (uint32_t cbid = 1; cbid < kMaxCbid; ++cbid) {
      const char* name = nullptr;
      if (s.api.GetCallbackName(doms[d], cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
      s.api_names[d][cbid] = display_api_name(name);
      g_class[d][cbid] = static_cast<lt::u8>(classify_api(doms[d], name));
    }
  }
  g_tables_built.store(true, std::memory_order_release);
}

struct ClockPair {
  uint64_t cupti = 0, mono = 0, error = 0;
  bool ok = false;
};

// cuptiGetTimestamp between two CLOCK_MONOTONIC reads; the narrowest window
// of several wins.
ClockPair read_clock_pair(State& s) {
  ClockPair best;
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 9; ++i) {
    uint64_t c = 0;
    uint64_t m0 = mono_ns();
    CUptiResult r = s.api.GetTimestamp(&c);
    uint64_t m1 = mono_ns();
    if (r != CUPTI_SUCCESS || c == 0) continue;
    if (m1 - m0 < best_width) {
      best_width = m1 - m0;
      best.cupti = c;
      best.mono = m0 + (m1 - m0) / 2;
      best.error = (m1 - m0 + 1) / 2;
      best.ok = true;
    }
  }
  return best;
}

void emit_clock(State& s, const ClockPair& p) {
  s.last_clock_ns = mono_ns();
  if (!p.ok) return;
  debug("clock: cupti=%llu mono=%llu offset=%lld +-%llu", static_cast<unsigned long long>(p.cupti),
        static_cast<unsigned long long>(p.mono), static_cast<long long>(g_ts_offset.load()),
        static_cast<unsigned long long>(p.error));
  if (!probe::clock_on()) return;
  lt::lt_gpu_clock c;
  std::memset(&c, 0, sizeof c);
  c.cupti_ns = p.cupti;
  c.monotonic_ns = p.mono;
  c.offset_ns = g_ts_offset.load();
  c.error_ns = p.error;
  probe::fire_clock(&c);
}

void check_dropped(State& s) {
  if (s.api.ActivityGetNumDroppedRecords == nullptr) return;
  size_t dropped = 0;
  if (s.api.ActivityGetNumDroppedRecords(nullptr, 0, &dropped) != CUPTI_SUCCESS || dropped == 0) return;
  s.dropped_total += dropped;
  status(LT_BRIDGE_DROPPED, 0, s.dropped_total,
         "CUPTI dropped " + std::to_string(dropped) + " records (total in dropped)");
}

// Product names of the devices, once the driver has them (never cuInit
// ourselves: only a driver already loaded and initialised is asked).
// `announce`: send them now (the attach replay sends them otherwise).
void refresh_devices(State& s, bool announce) {
  if (s.devices_known) return;
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return;
  auto get_count = reinterpret_cast<int (*)(int*)>(dlsym(h, "cuDeviceGetCount"));
  auto get_dev = reinterpret_cast<int (*)(int*, int)>(dlsym(h, "cuDeviceGet"));
  auto get_name = reinterpret_cast<int (*)(char*, int, int)>(dlsym(h, "cuDeviceGetName"));
  int n = 0;
  if (get_count && get_dev && get_name && get_count(&n) == 0 && n > 0) {
    s.devices.clear();
    for (int i = 0; i < n; ++i) {
      char buf[256] = {};
      int dev = 0;
      if (get_dev(&dev, i) != 0 || get_name(buf, sizeof buf - 1, dev) != 0) buf[0] = 0;
      s.devices.emplace_back(buf);
    }
    s.devices_known = true;
    if (announce)
      for (size_t i = 0; i < s.devices.size(); ++i)
        probe::emit_name(LT_NAME_DEVICE, static_cast<lt::u32>(i), s.devices[i]);
  }
  dlclose(h);
}

void replay_names(State& s) {
  if (!probe::name_on()) return;
  s.kernels.for_each([](lt::u32 id, std::string_view text) { probe::emit_name(LT_NAME_KERNEL, id, text); });
  for (size_t i = 0; i < s.devices.size(); ++i) probe::emit_name(LT_NAME_DEVICE, static_cast<lt::u32>(i), s.devices[i]);
  // The calls ltrace:launch reports, so launches have names right away.
  if (g_tables_built.load())
    for (int d = 0; d < 2; ++d)
      for (uint32_t cbid = 1; cbid < kMaxCbid; ++cbid)
        if (g_class[d][cbid]) announce_api(d ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
}

void on_exit_flush();

void set_callbacks(State& s, uint32_t enable) {
  const CUpti_CallbackDomain doms[2] = {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API};
  if (!enable && s.api.EnableDomain != nullptr) {
    for (auto d : doms) s.api.EnableDomain(0, s.sub, d);
    return;
  }
  for (int d = 0; d < 2; ++d)
    for (uint32_t cbid = 1; cbid < kMaxCbid; ++cbid)
      if (g_class[d][cbid]) s.api.EnableCallback(enable, s.sub, doms[d], cbid);
}

void activate(State& s) {
  s.waiting_driver = false;
  if (g_cupti_tainted.load()) {
    status(LT_BRIDGE_CUPTI_ERROR, 0, 0, "forked from a process with CUPTI subscribed: CUPTI not used here");
    return;
  }
  if (!s.api.loaded()) {
    std::string tried;
    if (!load_cupti(&s.api, &tried)) {
      status(LT_BRIDGE_NO_CUPTI, 0, 0, "libcupti not found; tried " + tried);
      return;
    }
  }
  if (!g_driver_mode.load() && !cuda_driver_loaded()) {
    // Subscribing would load and initialise CUDA in a process that has not:
    // wait for the application to do it.
    s.waiting_driver = true;
    status(LT_BRIDGE_DORMANT, 0, 0, "waiting for the CUDA driver (libcuda not loaded yet)");
    return;
  }
  build_tables(s);

  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult r = s.api.Subscribe(&sub, on_api, nullptr);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    status(LT_BRIDGE_CUPTI_BUSY, r, 0, "CUPTI is taken by another client (kineto/torch.profiler or Nsight): error 39");
    return;
  }
  if (r != CUPTI_SUCCESS) {
    status(LT_BRIDGE_CUPTI_ERROR, r, 0, "cuptiSubscribe: " + s.api.result_string(r));
    return;
  }
  s.sub = sub;
  set_callbacks(s, 1);
  r = s.api.ActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    set_callbacks(s, 0);
    s.api.Unsubscribe(sub);
    s.sub = nullptr;
    status(LT_BRIDGE_CUPTI_ERROR, r, 0, "cuptiActivityRegisterCallbacks: " + s.api.result_string(r));
    return;
  }

  // Timestamps on CLOCK_MONOTONIC: CUPTI's clock replaced by ours, else a
  // measured offset added to every record.
  g_flags.fetch_and(~LT_BRIDGE_F_TS_CALLBACK);
  g_ts_mono.store(true);
  if (s.api.ActivityRegisterTimestampCallback != nullptr &&
      s.api.ActivityRegisterTimestampCallback(timestamp_cb) == CUPTI_SUCCESS) {
    g_flags.fetch_or(LT_BRIDGE_F_TS_CALLBACK);
    g_ts_offset.store(0);
  } else {
    g_ts_mono.store(false);
    g_ts_offset.store(0);
  }
  ClockPair pair = read_clock_pair(s);
  if (!(g_flags.load() & LT_BRIDGE_F_TS_CALLBACK) && pair.ok)
    g_ts_offset.store(static_cast<int64_t>(pair.mono) - static_cast<int64_t>(pair.cupti));

  for (auto& a : g_api_announced)
    for (auto& f : a) f.store(0, std::memory_order_relaxed);
  s.dropped_total = 0;
  g_active.store(true, std::memory_order_release);
  s.enabled.clear();
  std::string failed;
  for (CUpti_ActivityKind k : kKinds) {
    CUptiResult e = s.api.ActivityEnable(k);
    if (e == CUPTI_SUCCESS) {
      s.enabled.push_back(k);
    } else {
      failed += failed.empty() ? "enable failed: " : ", ";
      failed += std::string(kind_label(k)) + "=" + std::to_string(static_cast<int>(e));
    }
  }
  if (!s.atexit_registered) {
    s.atexit_registered = atexit(on_exit_flush) == 0;
  }
  std::string where = s.api.path;
  if (size_t slash = where.rfind('/'); slash != std::string::npos) where = where.substr(slash + 1);
  status(LT_BRIDGE_ACTIVE, 0, 0, where + (failed.empty() ? "; all activity kinds on" : "; " + failed));
  emit_clock(s, pair);
  refresh_devices(s, false);  // replay_names() follows
}

void deactivate(State& s, const char* why) {
  if (!g_active.load()) {
    // The tracer waits for DORMANT whatever happened on attach.
    status(LT_BRIDGE_DORMANT, 0, 0, std::string(why) + ": CUPTI was not in use");
    return;
  }
  s.api.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  check_dropped(s);
  for (CUpti_ActivityKind k : s.enabled) s.api.ActivityDisable(k);
  s.enabled.clear();
  set_callbacks(s, 0);
  s.api.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_active.store(false, std::memory_order_release);
  CUptiResult r = s.api.Unsubscribe(s.sub);
  s.sub = nullptr;
  g_ts_mono.store(false);
  status(LT_BRIDGE_DORMANT, r, s.dropped_total,
         std::string(why) + (r == CUPTI_SUCCESS ? ": CUPTI released" : ": cuptiUnsubscribe " + s.api.result_string(r)));
}

void tick(State& s) {
  bool session = probe::session_on();
  if (session && !s.attached_seen) {
    s.attached_seen = true;
    debug("tracer attached");
    nvtx::claim_replay();  // NVTX callbacks need not replay again
    nvtx::replay_names();
    if (uint32_t m = nvtx::module_count())
      probe::emit_status(LT_BRIDGE_NVTX, 0, 0, 0, g_flags.load(), std::to_string(m) + " NVTX module(s) injected");
    activate(s);
    replay_names(s);
  } else if (session && s.waiting_driver) {
    if (cuda_driver_loaded()) {
      activate(s);
      replay_names(s);
    }
  } else if (!session && s.attached_seen) {
    s.attached_seen = false;
    s.waiting_driver = false;
    nvtx::note_session_left();
    debug("tracer left");
    deactivate(s, "tracer left");
  }
  if (g_active.load()) {
    s.api.ActivityFlushAll(0);
    check_dropped(s);
    if (mono_ns() - s.last_clock_ns >= kClockEveryNs) emit_clock(s, read_clock_pair(s));
    refresh_devices(s, true);
  }
}

void* poll_main(void*) {
  pthread_setname_np(pthread_self(), "ltrace-bridge");
  debug("poll thread started");
  while (!g_exiting.load(std::memory_order_relaxed)) {
    timespec ts{0, static_cast<long>(kPollNs)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    if (g_exiting.load(std::memory_order_relaxed)) break;
    State& s = st();
    if (pthread_mutex_lock(&s.mu) != 0) continue;
    try {
      tick(s);
    } catch (...) {
    }
    pthread_mutex_unlock(&s.mu);
    ops::tick();  // the op observer, CUDA or not
  }
  return nullptr;
}

// At exit while active: whatever CUPTI still holds goes out.
void on_exit_flush() {
  g_exiting.store(true);
  if (!g_active.load() || g_cupti_tainted.load()) return;
  State& s = st();
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 2;
  if (pthread_mutex_timedlock(&s.mu, &deadline) != 0) return;
  try {
    if (g_active.load()) {
      s.api.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      check_dropped(s);
    }
  } catch (...) {
  }
  pthread_mutex_unlock(&s.mu);
}

bool start_thread() {
  if (g_thread_started.exchange(true)) return true;
  // The thread takes no signals: the application's handlers keep running
  // where they ran before.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 1 << 20);  // CUPTI's flush runs our buffer callback here
  pthread_t t;
  int rc = pthread_create(&t, &attr, poll_main, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    g_thread_started.store(false);
    debug("pthread_create failed: %d", rc);
    return false;
  }
  return true;
}

bool start(uint32_t flags) noexcept {
  try {
    st();
    g_flags.fetch_or(flags);
    return start_thread();
  } catch (...) {
    return false;
  }
}

// ---- fork ----

void atfork_prepare() {
  nvtx::atfork_prepare();
  st().kernels.lock_for_fork();
}

void atfork_parent() {
  st().kernels.unlock_after_fork();
  nvtx::atfork_parent();
}

// The child has no poll thread and stays dormant.  If the parent had CUPTI
// subscribed, the child's copy of CUPTI's state is not ours to use.
void atfork_child() {
  ops::atfork_child();
  State& s = st();
  s.kernels.unlock_after_fork();
  nvtx::atfork_child();
  if (g_active.load() || s.sub != nullptr) g_cupti_tainted.store(true);
  pthread_mutex_init(&s.mu, nullptr);
  new (&s.walk_mu) std::mutex();
  g_thread_started.store(false);
  g_active.store(false);
  g_ts_mono.store(false);
  s.sub = nullptr;
  s.attached_seen = false;
  s.waiting_driver = false;
  s.enabled.clear();
  reset_tid_cache();
  t_rt_depth = 0;
  t_rt_corr = 0;
}

// ---- how we were loaded ----

// Does an injection variable (one path, or several joined by ':') name this
// library?
bool env_names_self(const char* var, const char* self_real) {
  const char* v = getenv(var);
  if (v == nullptr || v[0] == 0 || self_real == nullptr) return false;
  std::string all = v;
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t end = all.find(':', pos);
    if (end == std::string::npos) end = all.size();
    std::string one = all.substr(pos, end - pos);
    pos = end + 1;
    if (one.empty()) continue;
    if (one.find('/') == std::string::npos) {
      const char* base = strrchr(self_real, '/');
      if (base && one == base + 1) return true;
      continue;
    }
    char buf[PATH_MAX];
    if (realpath(one.c_str(), buf) != nullptr && strcmp(buf, self_real) == 0) return true;
  }
  return false;
}

__attribute__((constructor)) void on_load() {
  try {
    init_debug();
    Dl_info info{};
    char self[PATH_MAX] = {};
    bool have_name = dladdr(reinterpret_cast<void*>(&on_load), &info) != 0 && info.dli_fname != nullptr;
    bool have_self = have_name && realpath(info.dli_fname, self) != nullptr;
    // Stay mapped for good: the poll thread and the callbacks CUPTI / NVTX
    // hold must never see the code go away under them (dlclose is a no-op).
    // Loaded from a memfd ("/proc/self/fd/N", still open while we run) there
    // is no real path: the name it was loaded by finds it.
    if (have_name) dlopen(have_self ? self : info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    st();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    bool launch =
        have_self && (env_names_self("CUDA_INJECTION64_PATH", self) || env_names_self("NVTX_INJECTION64_PATH", self));
    const char* from = have_self ? self : (have_name ? info.dli_fname : "?");
    debug("loaded from %s (%s)", from, launch ? "launch-time injection" : "late: dlopen");
    if (!launch) start(LT_BRIDGE_F_LATE);
  } catch (...) {
  }
}

}  // namespace

uint32_t bridge_flags() {
  return g_flags.load(std::memory_order_relaxed);
}

}  // namespace ltb

// ---- the exported entry points (nothing else is exported) ----

// CUDA_INJECTION64_PATH: the driver calls this from cuInit.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  ltb::g_driver_mode.store(true);
  ltb::debug("InitializeInjection");
  ltb::start(0);
  return 1;
}

// A ptrace injector that dlopen()ed the library may call this too (the
// constructor already did the same); 1 = the poll thread runs.
extern "C" __attribute__((visibility("default"))) int ltrace_bridge_late_init(void) {
  return ltb::start(LT_BRIDGE_F_LATE) ? 1 : 0;
}
