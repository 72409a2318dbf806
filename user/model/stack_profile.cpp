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

}  // namespace lt
