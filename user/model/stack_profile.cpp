#include "user/model/stack_profile.h"

namespace lt {

std::string frame_label(const StackFrame& f) {
  // Keep the DSO / file next to an unresolved symbol: "<unknown> (libc.so.6)"
  // still says where the time went.
  std::string label = f.function.empty() ? "<unknown>" : f.function;
  if (f.file.empty()) return label;
  label += " (" + f.file;
  if (!f.native && f.line > 0) label += ":" + std::to_string(f.line);
  return label + ")";
}

std::string python_function_name(std::string_view qualname) {
  static constexpr std::string_view kResume = "torch_dynamo_resume_in_";
  const auto dot = qualname.rfind('.');
  const std::string_view owner = dot == std::string_view::npos ? "" : qualname.substr(0, dot + 1);
  std::string_view name = qualname.substr(owner.size());
  if (name.substr(0, kResume.size()) != kResume) return std::string(qualname);
  // Peel every resume prefix and its "_at_<line>" suffix (a break inside a
  // resume function nests them); what is left is the user's function.
  while (name.substr(0, kResume.size()) == kResume) {
    std::string_view rest = name.substr(kResume.size());
    const auto at = rest.rfind("_at_");
    if (at == std::string_view::npos || at == 0 || at + 4 == rest.size() ||
        rest.find_first_not_of("0123456789", at + 4) != std::string_view::npos)
      return std::string(qualname);  // not Dynamo's shape: as it is
    name = rest.substr(0, at);
  }
  return std::string(owner) + std::string(name) + " [after graph break]";
}

}  // namespace lt
