// NVTX3 tool side.  Every module (shared object) that includes the NVTX3
// headers calls InitializeInjectionNvtx2 once, on its first NVTX call, with
// its own export table; we write our functions into its CORE and CORE2
// slots.  The callbacks:
//   * keep the nesting level and range ids NVTX returns, always (the app
//     sees the same values with or without a tracer);
//   * record domains and registered strings, always (they are created once,
//     usually before a tracer attaches, and are replayed on attach);
//   * otherwise return at once while ltrace_nvtx_semaphore == 0.
#define NVTX_NO_IMPL
#include "torchbridge/nvtx.h"

#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "torchbridge/bridge.h"
#include "torchbridge/names.h"
#include "torchbridge/probes.h"
#include "torchbridge/util.h"

// The opaque handle types of nvToolsExt.h are the tool's to define.
struct nvtxDomainRegistration_st {
  lt::u32 id;
  std::string name;
};
struct nvtxStringRegistration_st {
  lt::u32 id;
  lt::u32 domain;
  std::string text;
};

namespace ltb::nvtx {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<nvtxDomainRegistration_st*> domains;  // id - 1 ->
  std::vector<nvtxStringRegistration_st*> strings;  // id - 1 ->
  std::unordered_map<std::string, nvtxDomainRegistration_st*> domain_by_name;
  std::map<std::pair<lt::u32, std::string>, nvtxStringRegistration_st*> string_by_key;
};

// Never destroyed: callbacks may run during exit, after static destructors.
Registry& reg() {
  static Registry* r = new Registry;
  return *r;
}

std::atomic<lt::u32> g_modules{0};
std::atomic<lt::u64> g_next_range{0};
std::atomic<bool> g_names_replayed{false};

// ---- per-thread push/pop depth, per domain ----
constexpr lt::u32 kFastDomains = 64;
thread_local int t_depth[kFastDomains];
thread_local std::unordered_map<lt::u32, int>* t_depth_more = nullptr;

int& depth_slot(lt::u32 domain) {
  if (domain < kFastDomains) return t_depth[domain];
  if (t_depth_more == nullptr) t_depth_more = new std::unordered_map<lt::u32, int>;
  return (*t_depth_more)[domain];
}

lt::u32 domain_id(nvtxDomainHandle_t d) {
  return d == nullptr ? 0 : d->id;
}

// ---- text ----

// One UTF-32 code point (wchar_t on Linux) -> UTF-8; invalid ones -> '?'.
std::size_t encode_utf8(uint32_t c, char* out) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = '?';
  if (c < 0x80) {
    out[0] = static_cast<char>(c);
    return 1;
  }
  if (c < 0x800) {
    out[0] = static_cast<char>(0xC0 | (c >> 6));
    out[1] = static_cast<char>(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (c >> 12));
    out[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (c & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (c >> 18));
  out[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (c & 0x3F));
  return 4;
}

void append_utf8(std::string& out, const wchar_t* w, std::size_t max_bytes) {
  char u[4];
  for (; *w != 0 && out.size() < max_bytes; ++w) out.append(u, encode_utf8(static_cast<uint32_t>(*w), u));
}

std::string to_utf8(const wchar_t* w) {
  std::string s;
  if (w != nullptr) append_utf8(s, w, kNameMax);
  return s;
}

constexpr std::size_t kMsgCap = LT_NVTX_MSG_MAX - 1;
constexpr std::size_t kMsgLenMax = 0xFFFF;

void set_ascii(lt::lt_nvtx& n, const char* s) {
  if (s == nullptr) return;
  std::size_t len = strnlen(s, kMsgLenMax);
  std::size_t c = len < kMsgCap ? len : kMsgCap;
  std::memcpy(n.msg, s, c);
  n.msg[c] = 0;
  n.msg_len = static_cast<lt::u16>(len);
}

void set_text(lt::lt_nvtx& n, std::string_view s) {
  std::size_t c = s.size() < kMsgCap ? s.size() : kMsgCap;
  std::memcpy(n.msg, s.data(), c);
  n.msg[c] = 0;
  n.msg_len = static_cast<lt::u16>(s.size() < kMsgLenMax ? s.size() : kMsgLenMax);
}

void set_wide(lt::lt_nvtx& n, const wchar_t* w) {
  if (w == nullptr) return;
  std::size_t used = 0, total = 0;
  bool cut = false;
  char u[4];
  for (; *w != 0 && total < kMsgLenMax; ++w) {
    std::size_t k = encode_utf8(static_cast<uint32_t>(*w), u);
    if (!cut && used + k <= kMsgCap) {
      std::memcpy(n.msg + used, u, k);  // whole characters only
      used += k;
    } else {
      cut = true;
    }
    total += k;
  }
  n.msg[used] = 0;
  n.msg_len = static_cast<lt::u16>(total < kMsgLenMax ? total : kMsgLenMax);
}

void set_attrs(lt::lt_nvtx& n, const nvtxEventAttributes_t* a) {
  if (a == nullptr) return;
  constexpr std::size_t kNeed = offsetof(nvtxEventAttributes_t, message) + sizeof(nvtxMessageValue_t);
  if (a->size < kNeed) return;
  n.category = a->category;
  if (a->colorType == NVTX_COLOR_ARGB) n.color = a->color;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      set_ascii(n, a->message.ascii);
      break;
    case NVTX_MESSAGE_TYPE_UNICODE:
      set_wide(n, a->message.unicode);
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      if (a->message.registered != nullptr) {
        n.string_id = a->message.registered->id;
        set_text(n, a->message.registered->text);
      }
      break;
    default:
      break;
  }
}

// ---- emission ----

void maybe_replay() {
  if (g_names_replayed.load(std::memory_order_relaxed)) {
    if (!probe::session_on()) g_names_replayed.store(false, std::memory_order_relaxed);
    return;
  }
  if (probe::session_on() && !g_names_replayed.exchange(true)) replay_names();
}

// Message sources for one event.
struct Msg {
  const nvtxEventAttributes_t* attrs = nullptr;
  const char* ascii = nullptr;
  const wchar_t* wide = nullptr;
};

void emit(lt::u16 type, lt::u32 domain, const Msg& m, lt::u64 range_id) {
  maybe_replay();
  lt::lt_nvtx n;
  std::memset(&n, 0, sizeof n);
  n.ts_ns = mono_ns();
  n.range_id = range_id;
  n.domain = domain;
  n.tid = current_tid();
  n.type = type;
  if (m.attrs)
    set_attrs(n, m.attrs);
  else if (m.ascii)
    set_ascii(n, m.ascii);
  else if (m.wide)
    set_wide(n, m.wide);
  probe::fire_nvtx(&n);
}

// ---- the callbacks (no exception leaves any of them) ----

int push(lt::u32 domain, const Msg& m) noexcept {
  int level = 0;
  try {
    level = depth_slot(domain)++;
    if (probe::nvtx_on()) emit(LT_NVTX_PUSH, domain, m, 0);
  } catch (...) {
  }
  return level;
}

int pop(lt::u32 domain) noexcept {
  int level = -1;
  try {
    int& d = depth_slot(domain);
    if (d > 0) level = --d;
    if (probe::nvtx_on()) emit(LT_NVTX_POP, domain, Msg{}, 0);
  } catch (...) {
  }
  return level;
}

nvtxRangeId_t start(lt::u32 domain, const Msg& m) noexcept {
  lt::u64 id = g_next_range.fetch_add(1, std::memory_order_relaxed) + 1;
  try {
    if (probe::nvtx_on()) emit(LT_NVTX_START, domain, m, id);
  } catch (...) {
  }
  return id;
}

void end(lt::u32 domain, nvtxRangeId_t id) noexcept {
  try {
    if (probe::nvtx_on()) emit(LT_NVTX_END, domain, Msg{}, id);
  } catch (...) {
  }
}

void mark(lt::u32 domain, const Msg& m) noexcept {
  try {
    if (probe::nvtx_on()) emit(LT_NVTX_MARK, domain, m, 0);
  } catch (...) {
  }
}

void MarkEx(const nvtxEventAttributes_t* a) {
  mark(0, Msg{a, nullptr, nullptr});
}
void MarkA(const char* s) {
  mark(0, Msg{nullptr, s, nullptr});
}
void MarkW(const wchar_t* s) {
  mark(0, Msg{nullptr, nullptr, s});
}
nvtxRangeId_t RangeStartEx(const nvtxEventAttributes_t* a) {
  return start(0, Msg{a, nullptr, nullptr});
}
nvtxRangeId_t RangeStartA(const char* s) {
  return start(0, Msg{nullptr, s, nullptr});
}
nvtxRangeId_t RangeStartW(const wchar_t* s) {
  return start(0, Msg{nullptr, nullptr, s});
}
void RangeEnd(nvtxRangeId_t id) {
  end(0, id);
}
int RangePushEx(const nvtxEventAttributes_t* a) {
  return push(0, Msg{a, nullptr, nullptr});
}
int RangePushA(const char* s) {
  return push(0, Msg{nullptr, s, nullptr});
}
int RangePushW(const wchar_t* s) {
  return push(0, Msg{nullptr, nullptr, s});
}
int RangePop() {
  return pop(0);
}

void DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  mark(domain_id(d), Msg{a, nullptr, nullptr});
}
nvtxRangeId_t DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return start(domain_id(d), Msg{a, nullptr, nullptr});
}
void DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  end(domain_id(d), id);
}
int DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return push(domain_id(d), Msg{a, nullptr, nullptr});
}
int DomainRangePop(nvtxDomainHandle_t d) {
  return pop(domain_id(d));
}

nvtxDomainHandle_t create_domain(std::string name) noexcept {
  try {
    Registry& r = reg();
    nvtxDomainRegistration_st* h = nullptr;
    bool fresh = false;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      auto it = r.domain_by_name.find(name);
      if (it != r.domain_by_name.end()) {
        h = it->second;
      } else {
        h = new nvtxDomainRegistration_st{static_cast<lt::u32>(r.domains.size() + 1), name};
        r.domains.push_back(h);
        r.domain_by_name.emplace(std::move(name), h);
        fresh = true;
      }
    }
    if (fresh) probe::emit_name(LT_NAME_NVTX_DOMAIN, h->id, h->name);
    return h;
  } catch (...) {
    return nullptr;  // the default domain: events still arrive
  }
}

nvtxDomainHandle_t DomainCreateA(const char* name) {
  try {
    return create_domain(name ? std::string(name) : std::string());
  } catch (...) {
    return nullptr;
  }
}
nvtxDomainHandle_t DomainCreateW(const wchar_t* name) {
  try {
    return create_domain(to_utf8(name));
  } catch (...) {
    return nullptr;
  }
}
// Handles stay valid (events may still name the domain); a later create of
// the same name returns the same handle.
void DomainDestroy(nvtxDomainHandle_t) {}

nvtxStringHandle_t register_string(nvtxDomainHandle_t d, std::string text) noexcept {
  try {
    Registry& r = reg();
    lt::u32 dom = domain_id(d);
    nvtxStringRegistration_st* h = nullptr;
    bool fresh = false;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      auto key = std::make_pair(dom, text);
      auto it = r.string_by_key.find(key);
      if (it != r.string_by_key.end()) {
        h = it->second;
      } else {
        h = new nvtxStringRegistration_st{static_cast<lt::u32>(r.strings.size() + 1), dom, std::move(text)};
        r.strings.push_back(h);
        r.string_by_key.emplace(std::move(key), h);
        fresh = true;
      }
    }
    if (fresh) probe::emit_name(LT_NAME_NVTX_STRING, h->id, h->text);
    return h;
  } catch (...) {
    return nullptr;
  }
}

nvtxStringHandle_t DomainRegisterStringA(nvtxDomainHandle_t d, const char* s) {
  try {
    return register_string(d, s ? std::string(s) : std::string());
  } catch (...) {
    return nullptr;
  }
}
nvtxStringHandle_t DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t* s) {
  try {
    return register_string(d, to_utf8(s));
  } catch (...) {
    return nullptr;
  }
}

template <class F>
bool install(NvtxFunctionTable table, unsigned int size, unsigned int slot, F fn) {
  if (table == nullptr || slot >= size || table[slot] == nullptr) return false;
  *table[slot] = reinterpret_cast<NvtxFunctionPointer>(fn);
  return true;
}

}  // namespace

void replay_names() {
  try {
    if (!probe::name_on()) return;
    Registry& r = reg();
    std::vector<std::pair<lt::u32, std::string>> doms, strs;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      for (auto* d : r.domains) doms.emplace_back(d->id, d->name);
      for (auto* s : r.strings) strs.emplace_back(s->id, s->text);
    }
    for (auto& [id, name] : doms) probe::emit_name(LT_NAME_NVTX_DOMAIN, id, name);
    for (auto& [id, text] : strs) probe::emit_name(LT_NAME_NVTX_STRING, id, text);
  } catch (...) {
  }
}

uint32_t module_count() {
  return g_modules.load(std::memory_order_relaxed);
}

bool claim_replay() {
  return !g_names_replayed.exchange(true);
}
void note_session_left() {
  g_names_replayed.store(false, std::memory_order_relaxed);
}

void atfork_prepare() {
  reg().mu.lock();
}
void atfork_parent() {
  reg().mu.unlock();
}
void atfork_child() {
  reg().mu.unlock();
  g_names_replayed.store(false, std::memory_order_relaxed);
}

int initialize(NvtxGetExportTableFunc_t get_table) noexcept {
  try {
    if (get_table == nullptr) return 0;
    auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
    if (cb == nullptr || cb->struct_size < sizeof(NvtxExportTableCallbacks) || cb->GetModuleFunctionTable == nullptr)
      return 0;
    unsigned installed = 0;
    NvtxFunctionTable t = nullptr;
    unsigned int n = 0;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) && t != nullptr) {
      installed += install(t, n, NVTX_CBID_CORE_MarkEx, &MarkEx);
      installed += install(t, n, NVTX_CBID_CORE_MarkA, &MarkA);
      installed += install(t, n, NVTX_CBID_CORE_MarkW, &MarkW);
      installed += install(t, n, NVTX_CBID_CORE_RangeStartEx, &RangeStartEx);
      installed += install(t, n, NVTX_CBID_CORE_RangeStartA, &RangeStartA);
      installed += install(t, n, NVTX_CBID_CORE_RangeStartW, &RangeStartW);
      installed += install(t, n, NVTX_CBID_CORE_RangeEnd, &RangeEnd);
      installed += install(t, n, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
      installed += install(t, n, NVTX_CBID_CORE_RangePushA, &RangePushA);
      installed += install(t, n, NVTX_CBID_CORE_RangePushW, &RangePushW);
      installed += install(t, n, NVTX_CBID_CORE_RangePop, &RangePop);
    }
    t = nullptr;
    n = 0;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) && t != nullptr) {
      installed += install(t, n, NVTX_CBID_CORE2_DomainMarkEx, &DomainMarkEx);
      installed += install(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, &DomainRangeStartEx);
      installed += install(t, n, NVTX_CBID_CORE2_DomainRangeEnd, &DomainRangeEnd);
      installed += install(t, n, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
      installed += install(t, n, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
      installed += install(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
      installed += install(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, &DomainRegisterStringW);
      installed += install(t, n, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
      installed += install(t, n, NVTX_CBID_CORE2_DomainCreateW, &DomainCreateW);
      installed += install(t, n, NVTX_CBID_CORE2_DomainDestroy, &DomainDestroy);
    }
    if (installed == 0) return 0;
    if (auto* vi = static_cast<const NvtxExportTableVersionInfo*>(get_table(NVTX_ETID_VERSIONINFO));
        vi != nullptr && vi->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
        vi->SetInjectionNvtxVersion != nullptr)
      vi->SetInjectionNvtxVersion(NVTX_VERSION);
    lt::u32 m = g_modules.fetch_add(1, std::memory_order_relaxed) + 1;
    std::string detail = "NVTX module " + std::to_string(m) + ": " + std::to_string(installed) + " callbacks";
    probe::emit_status(LT_BRIDGE_NVTX, 0, 0, 0, bridge_flags(), detail);
    return 1;
  } catch (...) {
    return 0;
  }
}

}  // namespace ltb::nvtx

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  return ltb::nvtx::initialize(get_table);
}
