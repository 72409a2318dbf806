// The name of an x86-64 system call ("futex", "read"), or "syscall N".
#pragma once
#include <string>

namespace lt::proc {

std::string syscall_name(long nr);

}  // namespace lt::proc
