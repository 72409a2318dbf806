// The input of every flame-graph export: a StackProfile and the name of the
// frame drawn below its stacks (typically the action, or "pid 123 / action").
#pragma once
#include <string>

#include "user/model/stack_profile.h"

namespace lt {

struct NamedProfile {
  std::string root;               // empty: the profile's stacks start at their own root frame
  const StackProfile* profile{};  // not owned; null entries are skipped
};

}  // namespace lt
