// Turns a failed libbpf call into the right lt::Error: a permission problem
// names the capability, anything else is a BPF error.
#pragma once
#include <string>

#include "user/core/errors.h"

namespace lt {

Error bpf_error(const std::string& what, int err);
// Throws lt::Error(permission) naming what is missing, before we try to load.
void check_bpf_privileges();

}  // namespace lt
