#include "user/torch/op_args.h"

#include <string>

namespace lt {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Splits at commas outside () and [].
std::vector<std::string_view> split_top(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (!trim(s.substr(start)).empty()) out.push_back(trim(s.substr(start)));
  return out;
}

// The type without alias annotations: "Tensor(a!)" -> "Tensor",
// "Tensor(a)[]" -> "Tensor[]".
std::string base_type(std::string_view t) {
  std::string out;
  int depth = 0;
  for (char c : t) {
    if (c == '(') ++depth;
    if (depth == 0) out += c;
    if (c == ')') --depth;
  }
  return out;
}

bool is_mutable_ref(std::string_view t) {
  return t.find('!') != std::string_view::npos;
}

// Splits a C++ parameter list at commas outside <> and ().
std::vector<std::string_view> split_params(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' || s[i] == '(') ++depth;
    if (s[i] == '>' || s[i] == ')') --depth;
    if (s[i] == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (!trim(s.substr(start)).empty()) out.push_back(trim(s.substr(start)));
  return out;
}

bool starts(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// Integer registers a C++ parameter type takes (x86-64 System V); -1 when
// we do not know.  Non-trivially-copyable types (SymInt, optional<SymInt>)
// go by invisible reference: one register.
int int_regs(std::string_view t) {
  if (!t.empty() && t.back() == '&') return 1;
  if (starts(t, "c10::OptionalArrayRef<")) return 0;  // 24 bytes: in memory
  if (starts(t, "c10::ArrayRef<")) return 2;          // pointer and length
  if (starts(t, "std::basic_string_view<") || starts(t, "c10::basic_string_view<")) return 2;
  if (starts(t, "std::optional<") || starts(t, "c10::optional<")) {  // c10::optional: torch < 2.2
    const std::string_view in = t.substr(14, t.size() - 15);
    if (starts(in, "c10::basic_string_view<") || starts(in, "std::basic_string_view<")) return 0;
    if (in == "long") return 2;    // 16 bytes, both integer class
    if (in == "double") return 1;  // SSE + integer
    if (in == "at::Dimname") return 2;
    return 1;  // ScalarType, Layout, Device, bool, MemoryFormat; SymInt by reference
  }
  if (t == "double" || t == "float") return 0;
  if (t == "c10::Stream") return 2;
  if (t == "long" || t == "bool" || t == "int" || t == "c10::ScalarType" || t == "c10::Layout" || t == "c10::Device" ||
      t == "c10::MemoryFormat" || t == "c10::QScheme" || t == "at::Dimname" || t == "c10::SymInt" ||
      t == "signed char" || t == "unsigned char" || starts(t, "std::array<bool"))
    return 1;
  return -1;
}

bool is_tensor(std::string_view t) {
  return t == "at::Tensor const&" || t == "at::Tensor&" || t == "std::optional<at::Tensor> const&" ||
         t == "c10::optional<at::Tensor> const&";
}

// Whether the C++ return value is passed through a hidden pointer (rdi).
int returns_in_memory(std::string_view ret) {
  ret = trim(ret);
  if (ret == "()") return 0;
  if (ret.front() == '(') {
    auto elems = split_top(ret.substr(1, ret.size() - 2));
    bool all_refs = true;
    for (auto e : elems) all_refs &= is_mutable_ref(e.substr(0, e.find(' ')));
    // std::tuple<Tensor&, Tensor&> fits rax:rdx; larger or by-value tuples do not
    return all_refs && elems.size() <= 2 ? 0 : 1;
  }
  const std::string_view type = ret.substr(0, ret.find(' '));
  if (is_mutable_ref(type) && type.find('[') == std::string_view::npos) return 0;  // Tensor&
  const std::string b = base_type(type);
  if (b == "int" || b == "float" || b == "bool" || b == "ScalarType" || b == "Layout" || b == "Device" ||
      b == "QScheme" || b == "MemoryFormat")
    return 0;
  return 1;  // Tensor, Scalar, SymInt, vectors, strings: non-trivial types
}

}  // namespace

OpArgRegs tensor_arg_registers(std::string_view signature, std::string_view schema) {
  OpArgRegs out;
  const auto open = signature.find('(');
  if (open == std::string_view::npos || signature.back() != ')') return out;
  const auto params = split_params(signature.substr(open + 1, signature.size() - open - 2));
  // The return type is in the schema (a C++ function's mangled name has
  // none).  The schema may be another op's sharing this one's text; its
  // return type is used only when its argument count agrees.
  int reg = -1;
  if (const auto arrow = schema.rfind(") -> "); arrow != std::string_view::npos) {
    const auto args_open = schema.find('(');
    std::size_t nargs = 0;
    if (args_open < arrow)
      for (auto a : split_top(schema.substr(args_open + 1, arrow - args_open - 1))) nargs += a != "*";
    if (nargs == params.size()) reg = returns_in_memory(schema.substr(arrow + 5));
  }
  if (reg < 0) {
    // in-place and out= ops return a reference; the rest a Tensor by value
    const auto ops = signature.find("::_ops::"), call = signature.find("::call(");
    const std::string_view op = ops < call ? signature.substr(ops + 8, call - ops - 8) : std::string_view();
    reg = !op.empty() && (op.back() == '_' || op.ends_with("_out") || op.find("_out_") != std::string_view::npos ||
                          op.find("__") != std::string_view::npos)
              ? 0
              : 1;
  }
  for (auto p : params) {
    out.tensor_reg.push_back(is_tensor(p) && reg >= 0 && reg < 6 ? static_cast<std::int8_t>(reg) : -1);
    const int n = int_regs(p);
    reg = n < 0 || reg < 0 ? -1 : reg + n;  // unknown: later arguments' registers are unknown too
  }
  out.known = true;
  return out;
}

}  // namespace lt
