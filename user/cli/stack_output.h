// Stack exports: collapsed stacks, an SVG flame graph and a speedscope file,
// each with one root per (process,) action.  Off-CPU stacks (weights in
// nanoseconds) go to a sibling file named *.offcpu.* for the collapsed and
// SVG forms, and into the same speedscope file as separate profiles.
#pragma once
#include <string>

#include "reports/aggregate/stacks.h"

namespace lt {

struct StackOutputPaths {
  std::string collapsed, flamegraph, speedscope;
};

// Throws lt::Error(io) if a file cannot be written.
void write_stack_exports(const StacksReport& stacks, const StackOutputPaths& paths);

// "out.svg" -> "out.offcpu.svg"
std::string offcpu_sibling(const std::string& path, const char* tag = ".offcpu");

}  // namespace lt
