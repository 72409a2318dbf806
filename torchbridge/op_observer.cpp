#include "torchbridge/op_observer.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>
#include <unordered_map>

#include "bpf/opobserver_shm.h"
#include "torchbridge/probes.h"
#include "torchbridge/util.h"

namespace ltb::ops {
namespace {

using lt::u16;
using lt::u32;
using lt::u64;
using lt::LT_OBS_ACTIVE;
using lt::LT_OBS_OFF;
using lt::LT_OBS_REFUSED;
using lt::LT_OBS_WAITING;

// torch's StartCallback returns std::unique_ptr<ObserverContext>: a class
// with a non-trivial destructor, so it is returned through a hidden pointer.
// This type is returned the same way; the observer keeps no context (its
// thread's stack pairs a start with its end).
struct NoContext {
  void* p;
  ~NoContext() {}
};
using NameFn = const char* (*)(const void* rf);  // at::RecordFunction::name() const
using RemoveFn = void (*)(u64 handle);           // at::removeCallback(CallbackHandle)
// at::addGlobalCallback(RecordFunctionCallback) takes the callback by value.
// It is trivially copyable and larger than 16 bytes, so the x86-64 ABI passes
// it in memory at the start of the stack arguments; a larger block holding
// its fields at the layout's offsets is passed the same way, and the callee
// reads only its own size of it.
struct CallbackBytes {
  alignas(8) unsigned char b[LT_OBS_CALLBACK_MAX];
};
using AddFn = u64 (*)(CallbackBytes cb);

constexpr const char* kAddSymbol = "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE";
constexpr const char* kRemoveSymbol = "_ZN2at14removeCallbackEm";
constexpr const char* kNameSymbol = "_ZNK2at14RecordFunction4nameEv";
constexpr std::size_t kNameMax = 1024;  // longer names are cut (torch's own are far shorter)
constexpr u32 kNoName = UINT32_MAX;

// ---- the shared buffer (made by the poll thread, never unmapped) ----
lt::lt_obs_header* g_hdr = nullptr;
unsigned char* g_base = nullptr;
int g_fd = -1;
std::atomic<bool> g_on{false};  // callbacks record
NameFn g_name = nullptr;
RemoveFn g_remove = nullptr;
u64 g_handle = 0;
bool g_registered = false;
pthread_key_t g_slot_key;
pthread_mutex_t g_names_mu = PTHREAD_MUTEX_INITIALIZER;
std::unordered_map<std::string, u32>* g_name_ids = nullptr;  // never destroyed (callbacks may run at exit)

template <typename T>
T load_acquire(const T& v) {
  return __atomic_load_n(&v, __ATOMIC_ACQUIRE);
}
template <typename T>
void store_release(T& v, T x) {
  __atomic_store_n(&v, x, __ATOMIC_RELEASE);
}

lt::lt_obs_slot* slots() {
  return reinterpret_cast<lt::lt_obs_slot*>(g_base + g_hdr->slots_offset);
}
u32* name_index() {
  return reinterpret_cast<u32*>(g_base + g_hdr->names_index_offset);
}
lt::lt_obs_span* ring(u32 slot) {
  return reinterpret_cast<lt::lt_obs_span*>(g_base + g_hdr->rings_offset) + std::size_t{slot} * LT_OBS_RING;
}

u64 now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<u64>(ts.tv_sec) * 1'000'000'000ull + static_cast<u64>(ts.tv_nsec);
}

// ---- per thread ----
struct Frame {
  const void* rf;
  u64 start, children;
};
struct CachedName {
  const char* ptr;
  u32 id, len;
};
// Plain data, zero at thread start (no constructor runs in a callback).
struct ThreadState {
  Frame stack[LT_OBS_DEPTH];
  u32 depth;  // calls open; above LT_OBS_DEPTH only counted
  u32 slot;   // slot index + 1; 0 = none yet
  u32 retry;  // no slot was free: calls until the next look
  CachedName names[256];
};
thread_local ThreadState t_state;

// A thread that exits frees its slot for reuse once the tracer read it out.
// Not in a forked child: the buffer is the parent's.
void release_slot(void* v) {
  const auto slot = static_cast<u32>(reinterpret_cast<std::uintptr_t>(v));
  if (g_hdr == nullptr || slot == 0 || slot > LT_OBS_SLOTS) return;
  if (static_cast<u32>(getpid()) != g_hdr->bridge_pid) return;
  store_release(slots()[slot - 1].free, u32{1});
}

lt::lt_obs_slot* slot_of(ThreadState& t) {
  if (t.slot) return &slots()[t.slot - 1];
  if (t.retry) {
    --t.retry;
    return nullptr;
  }
  const u32 tid = current_tid();
  for (u32 i = 0; i < LT_OBS_SLOTS; ++i) {
    lt::lt_obs_slot& s = slots()[i];
    u32 cur = load_acquire(s.tid);
    const bool usable = cur == 0 || (load_acquire(s.free) == 1 && load_acquire(s.tail) == s.head);
    if (!usable) continue;
    if (!__atomic_compare_exchange_n(&s.tid, &cur, tid, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) continue;
    store_release(s.free, u32{0});
    t.slot = i + 1;
    pthread_setspecific(g_slot_key, reinterpret_cast<void*>(static_cast<std::uintptr_t>(t.slot)));
    return &s;
  }
  __atomic_fetch_add(&g_hdr->no_slot, 1, __ATOMIC_RELAXED);
  t.retry = 4096;
  return nullptr;
}

const char* stored_name(u32 id, u32* len) {
  const unsigned char* p = g_base + g_hdr->names_offset + name_index()[id];
  std::memcpy(len, p, sizeof *len);
  return reinterpret_cast<const char*>(p + sizeof(u32));
}

// The name's id, added to the shared table the first time it is seen.
// Names are compared by content: a user scope's name lives in its
// RecordFunction and its address is reused for other names.
u32 intern(ThreadState& t, const char* name) {
  const std::size_t len = strnlen(name, kNameMax);
  CachedName& c = t.names[(reinterpret_cast<std::uintptr_t>(name) >> 3) & 255];
  if (c.ptr == name && c.len == len) {
    u32 stored_len;
    const char* s = stored_name(c.id, &stored_len);
    if (stored_len == len && std::memcmp(s, name, len) == 0) return c.id;
  }
  u32 id = kNoName;
  if (pthread_mutex_lock(&g_names_mu) != 0) return kNoName;
  try {
    std::string key(name, len);
    if (auto it = g_name_ids->find(key); it != g_name_ids->end()) {
      id = it->second;
    } else {
      const u32 n = g_hdr->names;
      const u64 at = g_hdr->name_bytes;
      const u64 need = (sizeof(u32) + len + 1 + 3) & ~u64{3};
      if (n < LT_OBS_NAMES && at + need <= LT_OBS_NAME_BYTES) {
        unsigned char* p = g_base + g_hdr->names_offset + at;
        const u32 l = static_cast<u32>(len);
        std::memcpy(p, &l, sizeof l);
        std::memcpy(p + sizeof l, name, len);
        p[sizeof l + len] = 0;
        name_index()[n] = static_cast<u32>(at);
        g_hdr->name_bytes = at + need;
        g_name_ids->emplace(std::move(key), n);
        store_release(g_hdr->names, n + 1);  // the tracer reads names below it
        id = n;
      }
    }
  } catch (...) {
    id = kNoName;
  }
  pthread_mutex_unlock(&g_names_mu);
  if (id != kNoName) c = {name, id, static_cast<u32>(len)};
  return id;
}

// ---- the callbacks: never throw, never block but for a new name ----
NoContext on_start(const void* rf) {
  if (g_on.load(std::memory_order_relaxed)) {
    ThreadState& t = t_state;
    if (t.depth < LT_OBS_DEPTH) {
      t.stack[t.depth] = {rf, 0, 0};
      t.stack[t.depth].start = now_ns();  // last: our own work is not the op's
    } else if (lt::lt_obs_slot* s = slot_of(t)) {
      __atomic_fetch_add(&s->too_deep, 1, __ATOMIC_RELAXED);
    }
    ++t.depth;
  }
  return {nullptr};
}

void on_end(const void* rf, void*) {
  const u64 end = now_ns();  // first
  ThreadState& t = t_state;
  if (t.depth == 0) return;  // its start came before we recorded
  if (t.depth > LT_OBS_DEPTH) {
    --t.depth;
    return;
  }
  // Normally the top; a call whose end never came here (ended on another
  // thread) is left behind.
  u32 i = t.depth;
  while (i > 0 && t.stack[i - 1].rf != rf) --i;
  if (i == 0) return;
  const Frame f = t.stack[i - 1];
  t.depth = i - 1;
  const u64 total = end > f.start ? end - f.start : 0;
  if (t.depth > 0) t.stack[t.depth - 1].children += total;
  if (!g_on.load(std::memory_order_relaxed)) return;
  lt::lt_obs_slot* s = slot_of(t);
  if (s == nullptr) return;
  const char* name = g_name(rf);
  if (name == nullptr) return;
  const u32 id = intern(t, name);
  if (id == kNoName) return;
  const u64 head = s->head;
  if (head - load_acquire(s->tail) >= LT_OBS_RING) {
    __atomic_fetch_add(&s->dropped, 1, __ATOMIC_RELAXED);  // the tracer is behind: count, never wait
    return;
  }
  lt::lt_obs_span& out = ring(t.slot - 1)[head & (LT_OBS_RING - 1)];
  out.start_ns = f.start;
  out.end_ns = end;
  out.self_ns = total > f.children ? total - f.children : 0;
  out.name = id;
  out.depth = static_cast<u16>(i);
  out.flags = 0;
  store_release(s->head, head + 1);
}

// ---- the poll thread's side ----
void set_state(u32 state, u32 answered, const std::string& detail) {
  std::memset(g_hdr->detail, 0, sizeof g_hdr->detail);
  std::memcpy(g_hdr->detail, detail.data(), std::min(detail.size(), sizeof g_hdr->detail - 1));
  g_hdr->answered = answered;
  store_release(g_hdr->state, state);
  debug("op observer: %s%s%s", state == LT_OBS_ACTIVE ? "active" : state == LT_OBS_OFF ? "off" : "refused",
        detail.empty() ? "" : ": ", detail.c_str());
}

bool make_buffer() {
  const u64 header = 4096;
  const u64 slots_bytes = sizeof(lt::lt_obs_slot) * LT_OBS_SLOTS;
  const u64 index_bytes = sizeof(u32) * LT_OBS_NAMES;
  const u64 rings_bytes = sizeof(lt::lt_obs_span) * LT_OBS_RING * u64{LT_OBS_SLOTS};
  const u64 size = header + slots_bytes + index_bytes + LT_OBS_NAME_BYTES + rings_bytes;
  const int fd = static_cast<int>(syscall(SYS_memfd_create, LT_OBS_MEMFD_NAME, 1u /* MFD_CLOEXEC */));
  if (fd < 0) {
    debug("op observer: memfd_create: %s", strerror(errno));
    return false;
  }
  // Pages are taken as written: ~1 MiB per thread that records, plus names.
  void* p = ftruncate(fd, static_cast<off_t>(size)) == 0
                ? mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                : MAP_FAILED;
  if (p == MAP_FAILED) {
    debug("op observer: buffer: %s", strerror(errno));
    close(fd);
    return false;
  }
  if (pthread_key_create(&g_slot_key, release_slot) != 0) {
    munmap(p, size);
    close(fd);
    return false;
  }
  g_name_ids = new std::unordered_map<std::string, u32>();
  g_fd = fd;
  g_base = static_cast<unsigned char*>(p);
  auto* h = reinterpret_cast<lt::lt_obs_header*>(g_base);
  h->version = LT_OBS_VERSION;
  h->slots = LT_OBS_SLOTS;
  h->ring = LT_OBS_RING;
  h->size = size;
  h->slots_offset = header;
  h->names_index_offset = header + slots_bytes;
  h->names_offset = h->names_index_offset + index_bytes;
  h->rings_offset = h->names_offset + LT_OBS_NAME_BYTES;
  h->bridge_pid = static_cast<u32>(getpid());
  h->state = LT_OBS_WAITING;
  g_hdr = h;
  store_release(h->magic, LT_OBS_MAGIC);  // last: the tracer reads nothing before it
  debug("op observer: buffer made (fd %d, %llu bytes)", fd, static_cast<unsigned long long>(size));
  return true;  // the fd stays open: the tracer maps it through /proc/PID/fd
}

// libtorch_cpu as loaded (Python loads it RTLD_LOCAL: not in the global scope).
int find_libtorch(dl_phdr_info* info, std::size_t, void* out) {
  if (info->dlpi_name && std::strstr(info->dlpi_name, "/libtorch_cpu.so")) {
    *static_cast<std::string*>(out) = info->dlpi_name;
    return 1;
  }
  return 0;
}

std::string check_layout(const lt::lt_obs_layout& l) {
  auto fits = [&l](u32 off, u32 width) { return u64{off} + width <= l.size; };
  if (l.size < 24 || l.size > LT_OBS_CALLBACK_MAX) return "callback size " + std::to_string(l.size) + " unsupported";
  if (!fits(l.off_start, 8) || !fits(l.off_end, 8) || !fits(l.off_sampling_prob, 8) ||
      !fits(l.off_scopes, l.num_scopes) || l.num_scopes == 0 || !fits(l.off_needs_inputs, 1) ||
      !fits(l.off_needs_outputs, 1) || !fits(l.off_needs_ids, 1))
    return "callback layout out of bounds";
  return "";
}

void activate(u32 request) {
  const lt::lt_obs_layout l = g_hdr->layout;
  if (g_registered) {  // a new tracer took over a live registration
    set_state(LT_OBS_ACTIVE, request, "already registered");
    return;
  }
  if (std::string why = check_layout(l); !why.empty()) return set_state(LT_OBS_REFUSED, request, why);
  std::string lib;
  dl_iterate_phdr(find_libtorch, &lib);
  if (lib.empty()) return set_state(LT_OBS_REFUSED, request, "libtorch_cpu.so is not loaded");
  void* h = dlopen(lib.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return set_state(LT_OBS_REFUSED, request, "dlopen(" + lib + ", RTLD_NOLOAD) failed");
  auto add = reinterpret_cast<AddFn>(dlsym(h, kAddSymbol));
  auto remove = reinterpret_cast<RemoveFn>(dlsym(h, kRemoveSymbol));
  auto name = reinterpret_cast<NameFn>(dlsym(h, kNameSymbol));
  dlclose(h);  // only drops the reference RTLD_NOLOAD took
  if (!add || !remove || !name)
    return set_state(LT_OBS_REFUSED, request, "at::addGlobalCallback / removeCallback / RecordFunction::name missing");
  CallbackBytes cb;
  std::memset(&cb, 0, sizeof cb);
  auto start_fn = &on_start;
  auto end_fn = &on_end;
  const double one = 1.0;
  std::memcpy(cb.b + l.off_start, &start_fn, sizeof start_fn);
  std::memcpy(cb.b + l.off_end, &end_fn, sizeof end_fn);
  std::memcpy(cb.b + l.off_sampling_prob, &one, sizeof one);
  std::memset(cb.b + l.off_scopes, 1, l.num_scopes);  // every scope, as torch.profiler records
  g_name = name;
  g_remove = remove;
  g_on.store(true, std::memory_order_release);
  try {
    g_handle = add(cb);
  } catch (...) {
    g_on.store(false);
    return set_state(LT_OBS_REFUSED, request, "at::addGlobalCallback threw");
  }
  g_registered = true;
  ++g_hdr->activations;
  set_state(LT_OBS_ACTIVE, request, lib);
}

void deactivate() {
  g_on.store(false, std::memory_order_release);
  try {
    g_remove(g_handle);
  } catch (...) {
  }
  g_registered = false;
  // Calls that started with the callback still end through it: the library
  // stays mapped for good, and with g_on off they only pop their frame.
  set_state(LT_OBS_OFF, g_hdr->answered, "the tracer left");
}

}  // namespace

void tick() noexcept {
  try {
    const bool wanted = probe::ops_on();
    if (wanted && g_hdr == nullptr && !make_buffer()) return;
    if (g_hdr == nullptr) return;
    if (wanted) {
      const u32 request = load_acquire(g_hdr->request);
      if (request != g_hdr->answered) activate(request);
    } else if (g_registered) {
      deactivate();
    }
  } catch (...) {
  }
}

void atfork_child() noexcept {
  g_on.store(false);
  g_registered = false;  // the parent's registration; this process never ticks
  pthread_mutex_init(&g_names_mu, nullptr);
  // The parent's buffer: a tracer looking at this process must not find it.
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
}

}  // namespace ltb::ops
