#include "torchbridge/op_observer.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
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

using lt::LT_OBS_ACTIVE;
using lt::LT_OBS_OFF;
using lt::LT_OBS_REFUSED;
using lt::LT_OBS_SHAPES_CHECKING;
using lt::LT_OBS_SHAPES_OFF;
using lt::LT_OBS_SHAPES_ON;
using lt::LT_OBS_WAITING;
using lt::u16;
using lt::u32;
using lt::u64;

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

static_assert(sizeof(lt::lt_obs_slot) == LT_OBS_SLOT_BYTES && sizeof(lt::lt_obs_span) == LT_OBS_SPAN_BYTES);
static_assert(sizeof(lt::lt_obs_header) <= LT_OBS_SLOTS_OFFSET);
#if !defined(__x86_64__)
#error "the callback is passed by value as the x86-64 ABI passes it (see CallbackBytes)"
#endif

// ---- the shared buffer (made by the poll thread).  Where its parts are is
// ours (constants), never read back from it: the other side writes there. ----
lt::lt_obs_header* g_hdr = nullptr;
lt::lt_obs_slot* g_slots = nullptr;
u32* g_index = nullptr;
unsigned char* g_names_area = nullptr;
lt::lt_obs_span* g_rings = nullptr;
int g_fd = -1;
u32 g_pid = 0;         // getpid() of the process that made it
u32 g_names_n = 0;     // names published (under g_names_mu)
u64 g_name_bytes = 0;  // name area used (under g_names_mu)
std::atomic<bool> g_names_full{false};
std::atomic<bool> g_on{false};  // callbacks record
NameFn g_name = nullptr;
RemoveFn g_remove = nullptr;
u64 g_handle = 0, g_user_handle = 0;  // the user-scope callback's: 0 none
bool g_registered = false;
bool g_registered_inputs = false;  // registered asking torch for inputs (shapes)
pthread_key_t g_slot_key;
pthread_mutex_t g_names_mu = PTHREAD_MUTEX_INITIALIZER;
std::unordered_map<std::string, u32>* g_name_ids = nullptr;  // never destroyed (callbacks may run at exit)
// Input shapes: where to read them (the tracer's layout), and how far
// they are trusted (g_shapes: LT_OBS_SHAPES_*, 0 = not asked).
lt::lt_obs_layout g_shape_layout{};
std::atomic<u32> g_shapes{0};
std::atomic<u32> g_checked{0};                                // calls whose inputs were read with checks
std::atomic<u32> g_tensors_tagged{0}, g_tensors_known{0};     // during the checks
constexpr u32 kCheckedCalls = 1024;                           // then the layout is trusted
constexpr u32 kMaxInputs = 256, kMaxTag = 64, kMaxDims = 64;  // beyond: the layout is not what we think

template <typename T>
T load_acquire(const T& v) {
  return __atomic_load_n(&v, __ATOMIC_ACQUIRE);
}
template <typename T>
void store_release(T& v, T x) {
  __atomic_store_n(&v, x, __ATOMIC_RELEASE);
}

lt::lt_obs_span* ring(u32 slot) {
  return g_rings + std::size_t{slot} * LT_OBS_RING;
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
  u32 shaped;  // the "name\x1fshapes" id read at its start, kNoName none
  u16 flags;   // LT_OBS_SPAN_*
};
struct CachedShapes {
  u64 h1, h2;  // two independent hashes of (name, key): a false match is ~2^-128
  u32 id;      // 0 = empty slot (ids are stored + 1)
};
constexpr std::size_t kKeyMax = 512;  // words of a call's shapes key; a longer one is cut
struct CachedName {
  const char* ptr;  // the last pointer this name came by (aten ops: always the same)
  u64 hash;
  u32 id, len;
};
// Plain data, zero at thread start (no constructor runs in a callback).
struct ThreadState {
  Frame stack[LT_OBS_DEPTH];
  u32 depth;  // calls open; above LT_OBS_DEPTH only counted
  u32 slot;   // slot index + 1; 0 = none yet
  u32 retry;  // no slot was free: calls until the next look
  u32 open;   // slot index + 1 whose open_since marks our outermost call; 0 = none
  CachedName by_ptr[256], by_hash[256];
  CachedShapes by_shapes[256];
  std::int64_t key[kKeyMax];  // the call being read: per input its ndim, then its sizes
};
thread_local ThreadState t_state;

// A thread that exits frees its slot for reuse once the tracer read it out
// (and records nothing more: destructors after ours may still run ops).
void release_slot(void* v) {
  const auto slot = static_cast<u32>(reinterpret_cast<std::uintptr_t>(v));
  t_state.slot = 0;
  t_state.retry = UINT32_MAX;
  if (g_slots == nullptr || slot == 0 || slot > LT_OBS_SLOTS) return;
  if (static_cast<u32>(getpid()) != g_pid) return;
  t_state.open = 0;
  store_release(g_slots[slot - 1].open_since, u64{0});  // nothing of ours is open any more
  store_release(g_slots[slot - 1].free, u32{1});
}

// The thread's ring.  A fresh slot is taken by its tid (0 -> ours); a slot
// whose thread exited by its `free` flag (1 -> 0), once the tracer read it
// out: one winner either way, so a ring has one writer.
lt::lt_obs_slot* slot_of(ThreadState& t) {
  if (t.slot) return &g_slots[t.slot - 1];
  if (t.retry) {
    --t.retry;
    __atomic_fetch_add(&g_hdr->no_slot, 1, __ATOMIC_RELAXED);
    return nullptr;
  }
  const u32 tid = current_tid();
  for (u32 i = 0; i < LT_OBS_SLOTS; ++i) {
    lt::lt_obs_slot& s = g_slots[i];
    u32 cur = load_acquire(s.tid);
    if (cur == 0) {
      if (!__atomic_compare_exchange_n(&s.tid, &cur, tid, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) continue;
    } else {
      if (load_acquire(s.free) != 1 || load_acquire(s.tail) != load_acquire(s.head)) continue;
      u32 one = 1;
      if (!__atomic_compare_exchange_n(&s.free, &one, 0u, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) continue;
      store_release(s.tid, tid);  // before any span of ours: the tracer reads it with the head
    }
    t.slot = i + 1;
    pthread_setspecific(g_slot_key, reinterpret_cast<void*>(static_cast<std::uintptr_t>(t.slot)));
    return &s;
  }
  __atomic_fetch_add(&g_hdr->no_slot, 1, __ATOMIC_RELAXED);
  t.retry = 4096;
  return nullptr;
}

bool same_as_stored(u32 id, const char* name, std::size_t len) {
  const unsigned char* p = g_names_area + g_index[id];
  u32 stored;
  std::memcpy(&stored, p, sizeof stored);
  return stored == len && std::memcmp(p + sizeof stored, name, len) == 0;
}

u64 fnv1a(const char* s, std::size_t n) {
  u64 h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 1099511628211ull;
  return h;
}

// The id of `len` bytes in the shared table, added the first time they are
// seen (under its lock; kNoName once nothing more fits).
u32 intern_bytes(const char* name, std::size_t len, u64 hash) {
  (void)hash;
  if (g_names_full.load(std::memory_order_relaxed)) return kNoName;  // no lock once nothing more fits
  u32 id = kNoName;
  if (pthread_mutex_lock(&g_names_mu) != 0) return kNoName;
  try {
    std::string key(name, len);
    if (auto it = g_name_ids->find(key); it != g_name_ids->end()) {
      id = it->second;
    } else {
      const u64 need = (sizeof(u32) + len + 1 + 3) & ~u64{3};
      if (g_names_n < LT_OBS_NAMES && need <= LT_OBS_NAME_BYTES - g_name_bytes) {
        unsigned char* at = g_names_area + g_name_bytes;
        const u32 l = static_cast<u32>(len);
        std::memcpy(at, &l, sizeof l);
        std::memcpy(at + sizeof l, name, len);
        at[sizeof l + len] = 0;
        g_index[g_names_n] = static_cast<u32>(g_name_bytes);
        g_name_bytes += need;
        g_name_ids->emplace(std::move(key), g_names_n);
        id = g_names_n++;
        g_hdr->name_bytes = g_name_bytes;
        store_release(g_hdr->names, g_names_n);  // the tracer reads names below it
      } else {
        g_names_full.store(true);
      }
    }
  } catch (...) {
    id = kNoName;
  }
  pthread_mutex_unlock(&g_names_mu);
  return id;
}

// The name's id.  An aten op's name has one address for good (its
// schema's); a user scope's lives in its RecordFunction, at an address
// reused for other names: the pointer cache is checked against the stored
// bytes, then a cache by content, then the table under its lock.
u32 intern(ThreadState& t, const char* name) {
  const std::size_t len = strnlen(name, kNameMax);
  CachedName& p = t.by_ptr[(reinterpret_cast<std::uintptr_t>(name) >> 3) & 255];
  if (p.ptr == name && p.len == len && same_as_stored(p.id, name, len)) return p.id;
  const u64 hash = fnv1a(name, len);
  CachedName& h = t.by_hash[hash & 255];
  if (h.ptr != nullptr && h.hash == hash && h.len == len && same_as_stored(h.id, name, len)) {
    p = {name, hash, h.id, h.len};
    return h.id;
  }
  const u32 id = intern_bytes(name, len, hash);
  if (id != kNoName) p = h = {name, hash, id, static_cast<u32>(len)};
  return id;
}

// ---- input shapes ----
// The first calls' inputs are read through process_vm_readv, which fails
// on a bad address instead of faulting: a layout that does not fit this
// torch is found out without harm (spans then go on without shapes).
// After kCheckedCalls calls that read as the layout says, plain loads.
bool read_checked(void* to, const void* from, std::size_t n) {
  iovec local{to, n};
  iovec remote{const_cast<void*>(from), n};
  return syscall(SYS_process_vm_readv, static_cast<long>(getpid()), &local, 1ul, &remote, 1ul, 0ul) ==
         static_cast<long>(n);
}

template <bool Checked>
bool load(void* to, const void* from, std::size_t n) {
  if constexpr (Checked) return read_checked(to, from, n);
  std::memcpy(to, from, n);
  return true;
}

void shapes_off(const char* why) {
  u32 cur = g_shapes.load();
  while (cur != LT_OBS_SHAPES_OFF && !g_shapes.compare_exchange_weak(cur, LT_OBS_SHAPES_OFF)) {
  }
  if (cur == LT_OBS_SHAPES_OFF || g_hdr == nullptr) return;
  std::memset(g_hdr->shapes_detail, 0, sizeof g_hdr->shapes_detail);
  std::strncpy(g_hdr->shapes_detail, why, sizeof g_hdr->shapes_detail - 1);
  store_release(g_hdr->shapes_state, u32{LT_OBS_SHAPES_OFF});
  debug("op observer: input shapes off: %s", why);
}

// The call's shapes key into t.key: per input its ndim (0 for anything
// not a plain tensor, as torch prints it: []), then its sizes.  The words
// used; SIZE_MAX when what it read is past the layout's bounds (the checks: the layout is wrong).
template <bool Checked>
std::size_t read_key(ThreadState& t, const void* rf) {
  const lt::lt_obs_layout& l = g_shape_layout;
  const auto* base = static_cast<const unsigned char*>(rf);
  struct {
    const unsigned char* data;
    u64 len;
  } inputs;
  if (!load<Checked>(&inputs, base + l.off_inputs, sizeof inputs)) return SIZE_MAX;
  if (inputs.len > kMaxInputs || (inputs.len && inputs.data == nullptr)) return SIZE_MAX;
  std::size_t n = 0;
  for (u64 i = 0; i < inputs.len && n < kKeyMax; ++i) {
    const unsigned char* iv = inputs.data + i * l.ivalue_size;
    u32 tag;
    const void* impl;
    if (!load<Checked>(&tag, iv + l.ivalue_tag, sizeof tag) || !load<Checked>(&impl, iv, sizeof impl)) return SIZE_MAX;
    if (tag >= kMaxTag) return SIZE_MAX;
    t.key[n] = 0;
    if (tag == l.tag_tensor && impl != nullptr) {
      if constexpr (Checked) g_tensors_tagged.fetch_add(1, std::memory_order_relaxed);
      u64 words[1 + 1 + 5];  // vtable ... ndim, five inline sizes
      const auto* w = static_cast<const unsigned char*>(impl);
      if (!load<Checked>(&words[0], w, 8)) return SIZE_MAX;
      // Only c10::TensorImpl itself: a subclass (undefined, sparse,
      // nested, functorch's) lays out or reports its sizes its own way.
      if (words[0] == l.tensor_vtable && load<Checked>(&words[1], w + 8ull * l.sizes_word, 6 * 8)) {
        if constexpr (Checked) g_tensors_known.fetch_add(1, std::memory_order_relaxed);
        const u64 ndim = words[1];
        if (ndim > kMaxDims) return SIZE_MAX;
        if (n + 1 + ndim > kKeyMax) break;
        const void* sizes = &words[2];
        std::int64_t out_of_line[kMaxDims];
        if (ndim > 5) {  // out of line: the first word is a pointer to sizes then strides
          const void* p;
          std::memcpy(&p, &words[2], sizeof p);
          if (p == nullptr || !load<Checked>(out_of_line, p, ndim * 8)) return SIZE_MAX;
          sizes = out_of_line;
        }
        t.key[n] = static_cast<std::int64_t>(ndim);
        std::memcpy(&t.key[n + 1], sizes, ndim * 8);
        if constexpr (Checked)
          for (u64 d = 0; d < ndim; ++d)
            if (t.key[n + 1 + d] < 0) return SIZE_MAX;
        n += ndim;
      }
    }
    ++n;
  }
  return n;
}

void append_int(std::string& s, std::int64_t v) {
  char buf[24];
  const int k = snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  s.append(buf, static_cast<std::size_t>(k));
}

// "name\x1f[[2, 3], []]": torch.profiler's input shapes (a list per input).
std::string shapes_text(const char* name, std::size_t len, const std::int64_t* key, std::size_t n) {
  std::string s(name, len);
  s += LT_OBS_SHAPES_SEP;
  s += '[';
  for (std::size_t i = 0; i < n;) {
    if (i) s += ", ";
    const auto ndim = static_cast<std::size_t>(key[i]);
    s += '[';
    for (std::size_t d = 0; d < ndim && i + 1 + d < n; ++d) {
      if (d) s += ", ";
      append_int(s, key[i + 1 + d]);
    }
    s += ']';
    i += 1 + ndim;
  }
  s += ']';
  return s;
}

// The (name, input shapes) id of a call at its start, kNoName when shapes
// are not recorded (not asked, found wrong, or a name table full).
u32 shaped_id(ThreadState& t, const void* rf) {
  // Acquire: the layout (g_shape_layout) was written before the state that
  // says to use it (a plain load on x86: no cost).
  const u32 state = g_shapes.load(std::memory_order_acquire);
  if (state != LT_OBS_SHAPES_CHECKING && state != LT_OBS_SHAPES_ON) return kNoName;
  std::size_t n;
  if (state == LT_OBS_SHAPES_CHECKING) {
    n = read_key<true>(t, rf);
    if (n == SIZE_MAX) {
      shapes_off("an input read otherwise than the layout says");
      return kNoName;
    }
    if (g_checked.fetch_add(1) + 1 == kCheckedCalls) {
      if (g_tensors_tagged.load() > 0 && g_tensors_known.load() == 0) {
        shapes_off("no input tensor is a c10::TensorImpl");
        return kNoName;
      }
      u32 checking = LT_OBS_SHAPES_CHECKING;
      if (g_shapes.compare_exchange_strong(checking, LT_OBS_SHAPES_ON) && g_hdr)
        store_release(g_hdr->shapes_state, u32{LT_OBS_SHAPES_ON});
    }
  } else {
    n = read_key<false>(t, rf);
    if (n == SIZE_MAX) return kNoName;  // an input past the bounds the checks held: this call goes without
  }
  const char* name = g_name(rf);
  if (name == nullptr) return kNoName;
  const std::size_t len = strnlen(name, kNameMax);
  u64 h1 = fnv1a(name, len), h2 = h1 * 0x9E3779B97F4A7C15ull + len;
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<u64>(t.key[i]);
    h1 = (h1 ^ v) * 1099511628211ull;
    h2 = (h2 ^ (v + 0x632BE59BD9B4E019ull + (h2 << 6) + (h2 >> 2))) * 0xff51afd7ed558ccdull;
  }
  CachedShapes& c = t.by_shapes[h1 & 255];
  if (c.id != 0 && c.h1 == h1 && c.h2 == h2) return c.id - 1;
  std::string text;
  try {
    text = shapes_text(name, len, t.key, n);
  } catch (...) {
    return kNoName;
  }
  const u32 id = intern_bytes(text.data(), text.size(), fnv1a(text.data(), text.size()));
  if (id != kNoName) c = {h1, h2, id + 1};
  return id;
}

// ---- the callbacks: never throw, never block but for a new name ----
// The thread's outermost call opens: open_since says so, first as "opening"
// (1), sequentially consistent, so that a tracer that read 0 read it before
// this call's clock was taken; then the time, no later than the call's start.
void mark_open(ThreadState& t) {
  lt::lt_obs_slot* s = slot_of(t);
  if (s == nullptr) return;
  __atomic_store_n(&s->open_since, u64{1}, __ATOMIC_SEQ_CST);
  store_release(s->open_since, now_ns());
  t.open = t.slot;
}

void unmark_open(ThreadState& t) {
  if (t.open == 0 || t.open != t.slot) return;
  store_release(g_slots[t.open - 1].open_since, u64{0});
  t.open = 0;
}

// The call's span into the thread's ring; a full ring or a name that does
// not fit drops it, counted.
void record(ThreadState& t, const void* rf, const Frame& f, u64 end, u64 total, u32 depth) {
  lt::lt_obs_slot* s = slot_of(t);
  if (s == nullptr) return;
  u32 id = f.shaped;
  u16 flags = f.flags;
  if (id == kNoName) {
    const char* name = g_name(rf);
    id = name ? intern(t, name) : kNoName;
  } else {
    flags |= LT_OBS_SPAN_SHAPES;
  }
  const u64 head = s->head;
  if (id == kNoName || head - load_acquire(s->tail) >= LT_OBS_RING) {
    __atomic_fetch_add(&s->dropped, 1, __ATOMIC_RELAXED);  // the tracer is behind: count, never wait
    return;
  }
  lt::lt_obs_span& out = ring(t.slot - 1)[head & (LT_OBS_RING - 1)];
  out.start_ns = f.start;
  out.end_ns = end;
  out.self_ns = total > f.children ? total - f.children : 0;
  out.name = id;
  out.depth = static_cast<u16>(depth);
  out.flags = flags;
  store_release(s->head, head + 1);
}

void start_frame(const void* rf, u16 flags) {
  if (g_on.load(std::memory_order_relaxed)) {
    ThreadState& t = t_state;
    // A frame with this address is a call whose end came on another thread
    // (its RecordFunction freed, the address reused): it and what is above
    // it are over.
    for (u32 i = std::min<u32>(t.depth, LT_OBS_DEPTH); i > 0; --i)
      if (t.stack[i - 1].rf == rf) {
        t.depth = i - 1;
        break;
      }
    if (t.depth == 0) mark_open(t);
    if (t.depth < LT_OBS_DEPTH) {
      // Inputs are there only now, in the start callback.
      const u32 shaped = flags & LT_OBS_SPAN_USER ? kNoName : shaped_id(t, rf);
      t.stack[t.depth] = {rf, 0, 0, shaped, flags};
      t.stack[t.depth].start = now_ns();  // last: our own work is not the op's
    } else if (lt::lt_obs_slot* s = slot_of(t)) {
      __atomic_fetch_add(&s->too_deep, 1, __ATOMIC_RELAXED);
    }
    ++t.depth;
  }
}

NoContext on_start(const void* rf) {
  start_frame(rf, 0);
  return {nullptr};
}

// The second callback, of RecordScope::USER_SCOPE alone: record_function().
NoContext on_start_user(const void* rf) {
  start_frame(rf, LT_OBS_SPAN_USER);
  return {nullptr};
}

void on_end(const void* rf, void*) {
  ThreadState& t = t_state;
  if (t.depth == 0) return;  // its start came before we recorded (a fork child: always)
  const u64 end = now_ns();  // before our own work
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
  if (g_on.load(std::memory_order_relaxed)) record(t, rf, f, end, total, i);
  if (t.depth == 0) unmark_open(t);  // after the span is published: the tracer reads open_since first
}

// ---- the poll thread's side ----
// The answer: detail and state first, then `answered` (the tracer reads
// them once it sees its request answered).
void set_state(u32 state, u32 answered, const std::string& detail) {
  std::memset(g_hdr->detail, 0, sizeof g_hdr->detail);
  std::memcpy(g_hdr->detail, detail.data(), std::min(detail.size(), sizeof g_hdr->detail - 1));
  store_release(g_hdr->state, state);
  store_release(g_hdr->answered, answered);
  debug("op observer: %s%s%s",
        state == LT_OBS_ACTIVE ? "active"
        : state == LT_OBS_OFF  ? "off"
                               : "refused",
        detail.empty() ? "" : ": ", detail.c_str());
}

bool make_buffer() {
  constexpr unsigned kCloexec = 1u, kAllowSealing = 2u;  // MFD_CLOEXEC, MFD_ALLOW_SEALING
  const int fd = static_cast<int>(syscall(SYS_memfd_create, LT_OBS_MEMFD_NAME, kCloexec | kAllowSealing));
  if (fd < 0) {
    debug("op observer: memfd_create: %s", strerror(errno));
    return false;
  }
  // Its size sealed: a reader's mapping can never lose pages under it.
  // Pages are taken as written: ~1 MiB per thread that records, plus names.
  void* p = ftruncate(fd, static_cast<off_t>(LT_OBS_SIZE)) == 0 &&
                    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0
                ? mmap(nullptr, LT_OBS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                : MAP_FAILED;
  if (p == MAP_FAILED) {
    debug("op observer: buffer: %s", strerror(errno));
    close(fd);
    return false;
  }
  if (pthread_key_create(&g_slot_key, release_slot) != 0) {
    munmap(p, LT_OBS_SIZE);
    close(fd);
    return false;
  }
  g_name_ids = new std::unordered_map<std::string, u32>();
  g_fd = fd;
  auto* base = static_cast<unsigned char*>(p);
  g_slots = reinterpret_cast<lt::lt_obs_slot*>(base + LT_OBS_SLOTS_OFFSET);
  g_index = reinterpret_cast<u32*>(base + LT_OBS_INDEX_OFFSET);
  g_names_area = base + LT_OBS_NAMES_OFFSET;
  g_rings = reinterpret_cast<lt::lt_obs_span*>(base + LT_OBS_RINGS_OFFSET);
  g_pid = static_cast<u32>(getpid());
  auto* h = reinterpret_cast<lt::lt_obs_header*>(base);
  h->version = LT_OBS_VERSION;
  h->slots = LT_OBS_SLOTS;
  h->ring = LT_OBS_RING;
  h->size = LT_OBS_SIZE;
  h->slots_offset = LT_OBS_SLOTS_OFFSET;
  h->names_index_offset = LT_OBS_INDEX_OFFSET;
  h->names_offset = LT_OBS_NAMES_OFFSET;
  h->rings_offset = LT_OBS_RINGS_OFFSET;
  h->bridge_pid = g_pid;
  h->state = LT_OBS_WAITING;
  g_hdr = h;
  store_release(h->magic, LT_OBS_MAGIC);  // last: the tracer reads nothing before it
  debug("op observer: buffer made (fd %d, %llu bytes)", fd, static_cast<unsigned long long>(LT_OBS_SIZE));
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

std::string check_shapes_layout(const lt::lt_obs_layout& l) {
  if (l.off_inputs % 8 != 0 || l.off_inputs > 4096 || l.ivalue_size < 8 || l.ivalue_size > 64 ||
      u64{l.ivalue_tag} + 4 > l.ivalue_size || l.sizes_word == 0 || l.sizes_word > 64 || l.tensor_vtable == 0)
    return "input shapes layout out of bounds";
  return "";
}

// Shapes as this request asks: read with checks from the next call on.
void ask_shapes(const lt::lt_obs_layout& l) {
  g_shapes.store(0);
  g_checked.store(0);
  g_tensors_tagged.store(0);
  g_tensors_known.store(0);
  std::memset(g_hdr->shapes_detail, 0, sizeof g_hdr->shapes_detail);
  store_release(g_hdr->shapes_state, u32{0});
  if (!l.shapes) return;
  g_shape_layout = l;
  g_shapes.store(LT_OBS_SHAPES_CHECKING);
  store_release(g_hdr->shapes_state, u32{LT_OBS_SHAPES_CHECKING});
}

void remove_callbacks() {
  for (u64 handle : {g_handle, g_user_handle}) {
    if (handle == 0) continue;
    try {
      g_remove(handle);
    } catch (...) {
    }
  }
  g_handle = g_user_handle = 0;
  g_registered = false;
}

void activate(u32 request) {
  const lt::lt_obs_layout l = g_hdr->layout;
  if (std::string why = check_layout(l); !why.empty()) return set_state(LT_OBS_REFUSED, request, why);
  if (l.shapes)
    if (std::string why = check_shapes_layout(l); !why.empty()) return set_state(LT_OBS_REFUSED, request, why);
  if (g_registered) {  // a new tracer took over a live registration
    if (g_registered_inputs == (l.shapes != 0)) {
      ask_shapes(l);
      set_state(LT_OBS_ACTIVE, request, "already registered");
      return;
    }
    g_on.store(false, std::memory_order_release);  // asked otherwise for inputs: registered anew
    remove_callbacks();
  }
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
  // Every scope, as torch.profiler records; user scopes (when the layout
  // names theirs) through a callback of their own, so that spans say so.
  const bool split = l.user_scope < l.num_scopes;
  auto callback = [&l](NoContext (*start_fn)(const void*), bool user) {
    CallbackBytes cb;
    std::memset(&cb, 0, sizeof cb);
    auto end_fn = &on_end;
    const double one = 1.0;
    std::memcpy(cb.b + l.off_start, &start_fn, sizeof start_fn);
    std::memcpy(cb.b + l.off_end, &end_fn, sizeof end_fn);
    std::memcpy(cb.b + l.off_sampling_prob, &one, sizeof one);
    for (u32 i = 0; i < l.num_scopes; ++i) cb.b[l.off_scopes + i] = (i == l.user_scope) == user ? 1 : 0;
    // torch boxes every op's arguments for a callback that needs inputs
    // (as for torch.profiler's record_shapes): only when shapes are asked.
    cb.b[l.off_needs_inputs] = l.shapes && !user ? 1 : 0;
    return cb;
  };
  g_name = name;
  g_remove = remove;
  ask_shapes(l);
  g_on.store(true, std::memory_order_release);
  try {
    g_handle = add(callback(&on_start, false));
  } catch (...) {
    g_on.store(false);
    return set_state(LT_OBS_REFUSED, request, "at::addGlobalCallback threw");
  }
  g_user_handle = 0;
  if (split) {
    try {
      g_user_handle = add(callback(&on_start_user, true));
    } catch (...) {
      g_on.store(false);
      try {
        remove(g_handle);
      } catch (...) {
      }
      return set_state(LT_OBS_REFUSED, request, "at::addGlobalCallback threw (user scopes)");
    }
  }
  g_registered = true;
  g_registered_inputs = l.shapes != 0;
  ++g_hdr->activations;
  set_state(LT_OBS_ACTIVE, request, lib);
}

void deactivate() {
  g_on.store(false, std::memory_order_release);
  remove_callbacks();
  // Calls that started with the callback still end through it: the library
  // stays mapped for good, and with g_on off they only pop their frame.
  if (g_hdr) set_state(LT_OBS_OFF, load_acquire(g_hdr->answered), "the tracer left");
}

}  // namespace

void tick() noexcept {
  try {
    const bool wanted = probe::ops_on();
    if (!wanted && g_registered) deactivate();
    if (wanted && g_hdr == nullptr && !make_buffer()) return;
    if (g_hdr == nullptr || !wanted) return;
    // A request counts once a tracer claimed the buffer (its layout is
    // written before it bumps the request).
    const u32 request = load_acquire(g_hdr->request);
    if (request != load_acquire(g_hdr->answered) && load_acquire(g_hdr->reader_pid) != 0) activate(request);
  } catch (...) {
  }
}

// The child keeps torch's callback list, ours in it (g_registered stays:
// should it ever tick, it removes it), with recording off.  The parent's
// buffer is not its own: unmapped, its fd closed, the forking thread's
// state and the name table start afresh.
void atfork_child() noexcept {
  g_on.store(false);
  g_shapes.store(0);
  pthread_mutex_init(&g_names_mu, nullptr);
  if (g_hdr != nullptr) munmap(g_hdr, LT_OBS_SIZE);
  g_hdr = nullptr;
  g_slots = nullptr;
  g_index = nullptr;
  g_names_area = nullptr;
  g_rings = nullptr;
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
  g_names_n = 0;
  g_name_bytes = 0;
  g_names_full.store(false);
  g_name_ids = nullptr;  // the parent's (its lock may have been held at the fork): left behind
  std::memset(static_cast<void*>(&t_state), 0, sizeof t_state);
}

}  // namespace ltb::ops
