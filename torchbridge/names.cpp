#include "torchbridge/names.h"

#include <algorithm>
#include <cstring>

namespace ltb {

NameInterner::Result NameInterner::intern(const char* text) {
  if (text == nullptr) return {};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_ptr_.find(text);
  if (it != by_ptr_.end()) {
    const std::string& known = texts_[it->second - 1];
    // The common case: same pointer, same text.  Compare without strlen.
    if (std::strncmp(known.c_str(), text, known.size() + 1) == 0 ||
        (known.size() == kNameMax && std::strncmp(known.c_str(), text, kNameMax) == 0))
      return {it->second, false};
  }
  std::size_t len = strnlen(text, kNameMax);
  Result r = intern_locked(std::string_view(text, len));
  by_ptr_[text] = r.id;
  return r;
}

NameInterner::Result NameInterner::intern_text(std::string_view text) {
  std::lock_guard<std::mutex> lock(mu_);
  return intern_locked(text.substr(0, std::min(text.size(), kNameMax)));
}

NameInterner::Result NameInterner::intern_locked(std::string_view text) {
  auto it = by_text_.find(text);
  if (it != by_text_.end()) return {it->second, false};
  texts_.emplace_back(text);
  auto id = static_cast<lt::u32>(texts_.size());
  by_text_.emplace(std::string_view(texts_.back()), id);
  return {id, true};
}

std::string_view NameInterner::text(lt::u32 id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > texts_.size()) return {};
  return texts_[id - 1];
}

std::size_t NameInterner::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return texts_.size();
}

std::size_t split_name(lt::u16 kind, lt::u32 id, std::string_view text, NameChunkFn emit, void* ctx) {
  if (text.size() > kNameMax) text = text.substr(0, kNameMax);
  lt::lt_gpu_name chunk;
  std::size_t n = 0;
  std::size_t off = 0;
  do {
    std::memset(&chunk, 0, sizeof chunk);
    std::size_t len = std::min<std::size_t>(text.size() - off, LT_GPU_NAME_CHUNK);
    chunk.id = id;
    chunk.kind = kind;
    chunk.len = static_cast<lt::u16>(len);
    chunk.offset = static_cast<lt::u32>(off);
    chunk.total_len = static_cast<lt::u32>(text.size());
    if (len) std::memcpy(chunk.text, text.data() + off, len);
    emit(chunk, ctx);
    ++n;
    off += len;
  } while (off < text.size());
  return n;
}

namespace {

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Strips one trailing "_v<digits>" with at least `min_digits` digits.
bool strip_version(std::string_view& s, std::size_t min_digits) {
  std::size_t p = s.rfind("_v");
  if (p == std::string_view::npos) return false;
  std::string_view digits = s.substr(p + 2);
  if (digits.size() < min_digits || !is_digits(digits)) return false;
  s = s.substr(0, p);
  return true;
}

bool strip_suffix(std::string_view& s, std::string_view suffix) {
  if (s.size() <= suffix.size() || s.substr(s.size() - suffix.size()) != suffix) return false;
  s.remove_suffix(suffix.size());
  return true;
}

}  // namespace

std::string display_api_name(std::string_view cupti_name) {
  strip_version(cupti_name, 4);
  return std::string(cupti_name);
}

std::string api_base_name(std::string_view cupti_name) {
  bool changed = true;
  while (changed) {
    changed = strip_suffix(cupti_name, "_ptsz") || strip_suffix(cupti_name, "_ptds") || strip_version(cupti_name, 1);
  }
  return std::string(cupti_name);
}

}  // namespace ltb
