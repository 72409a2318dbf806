#include "reports/aggregate/kernel_names.h"

#include <cxxabi.h>

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace lt {

std::string demangle_kernel(const std::string& mangled) {
  // Only "_Z" names: __cxa_demangle also takes bare type codes ("i" -> "int").
  if (mangled.size() < 3 || mangled.compare(0, 2, "_Z") != 0) return mangled;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

namespace {

bool opens(char c) {
  return c == '(' || c == '<' || c == '[' || c == '{';
}
bool closes(char c) {
  return c == ')' || c == '>' || c == ']' || c == '}';
}

// The position of the bracket that closes the one opening at `open` (any kind
// counts for depth), or npos.
std::size_t match_forward(const std::string& s, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    if (opens(s[i])) ++depth;
    if (closes(s[i]) && --depth == 0) return i;
  }
  return std::string::npos;
}

// The position of the bracket that opens the one closing at `close`, or npos.
std::size_t match_backward(const std::string& s, std::size_t close) {
  int depth = 0;
  for (std::size_t i = close + 1; i-- > 0;) {
    if (closes(s[i])) ++depth;
    if (opens(s[i]) && --depth == 0) return i;
  }
  return std::string::npos;
}

}  // namespace

std::string short_kernel_name(const std::string& demangled) {
  const std::string& s = demangled;
  // The parameter list: the last top-level "(...)"; after it come only
  // qualifiers such as " const" or " [clone .cold]", and before it any
  // "(anonymous namespace)" or "operator()" groups.  Bracketed groups nest, so
  // lambdas ("{lambda(float)#1}") and template arguments are skipped whole.
  // (Unbalanced text comes back whole; names with a bare '<' or '>' that still
  // balance -- operator<, "->" -- are not kernel names and give some part.)
  std::size_t end = s.size();
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!opens(s[i])) continue;
    const std::size_t close = match_forward(s, i);
    if (close == std::string::npos) return s;  // unbalanced: not a signature we can read
    if (s[i] == '(' && s.compare(i, 21, "(anonymous namespace)") != 0) end = i;
    i = close;
  }
  // Template arguments of the function itself.
  while (end > 0 && s[end - 1] == ' ') --end;
  if (end > 0 && s[end - 1] == '>') {
    const std::size_t open = match_backward(s, end - 1);
    if (open != std::string::npos && open > 0) end = open;
  }
  // The last component: back to a top-level "::" or space (the return type).
  std::size_t begin = end;
  while (begin > 0) {
    const char c = s[begin - 1];
    if (closes(c)) {
      const std::size_t open = match_backward(s, begin - 1);
      if (open == std::string::npos) break;
      begin = open;
      continue;
    }
    if (c == ' ' || c == ':') break;
    --begin;
  }
  std::string name = s.substr(begin, end - begin);
  return name.empty() ? s : name;
}

}  // namespace lt
