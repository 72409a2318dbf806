#include "user/python/debug_offsets.h"

#include <array>
#include <cstring>
#include <string>

#include "user/core/errors.h"
#include "user/proc/procfs.h"

namespace lt::python {

namespace {
// Where each field sits inside _Py_DebugOffsets (3.13 layout: every field is
// a uint64; each sub-struct starts with its own size).
struct Check {
  const char* what;
  unsigned at;  // offset inside _Py_DebugOffsets
  unsigned expected;
};
}  // namespace

void verify_debug_offsets(pid_t pid, std::uint64_t runtime_addr, int minor, const Layout& layout) {
  if (minor != 13)
    throw Error(ExitCode::unsupported, "CPython 3." + std::to_string(minor) + " debug offsets are not known yet");
  std::array<std::uint8_t, 584> raw{};
  if (!proc::read_memory(pid, runtime_addr, raw.data(), raw.size()))
    throw Error(ExitCode::permission, "cannot read the target's memory (need CAP_SYS_PTRACE or root)");
  if (std::memcmp(raw.data(), "xdebugpy", 8) != 0)
    throw Error(ExitCode::unsupported, "_PyRuntime does not start with the _Py_DebugOffsets cookie");
  auto u64_at = [&](unsigned at) {
    std::uint64_t v;
    std::memcpy(&v, raw.data() + at, 8);
    return v;
  };
  std::uint64_t version = u64_at(8);
  if (((version >> 24) & 0xff) != 3 || ((version >> 16) & 0xff) != static_cast<unsigned>(minor))
    throw Error(ExitCode::unsupported, "_Py_DebugOffsets version does not match the binary");
  if (u64_at(16) != 0) throw Error(ExitCode::unsupported, "free-threaded CPython is not supported yet");
  const auto& o = layout.bpf;
  const Check checks[] = {
      {"runtime_state.interpreters_head", 24 + 8 * 2, layout.runtime_interp_head},
      {"interpreter_state.threads_head", 48 + 8 * 3, layout.interp_threads_head},
      {"thread_state.next", 152 + 8 * 2, layout.tstate_next},
      {"thread_state.current_frame", 152 + 8 * 4, layout.tstate_frame},
      {"thread_state.thread_id", 152 + 8 * 5, layout.tstate_thread_id},
      {"code_object.linetable", 272 + 8 * 4, layout.code_linetable},
      {"interpreter_frame.previous", 224 + 8 * 1, layout.frame_previous},
      {"interpreter_frame.executable", 224 + 8 * 2, o.frame_code},
      {"interpreter_frame.instr_ptr", 224 + 8 * 3, o.frame_lasti},
      {"interpreter_frame.localsplus", 224 + 8 * 4, o.frame_localsplus},
      {"interpreter_frame.owner", 224 + 8 * 5, layout.frame_owner},
      {"code_object.filename", 272 + 8 * 1, o.code_filename},
      {"code_object.name", 272 + 8 * 2, o.code_name},
      {"code_object.qualname", 272 + 8 * 3, layout.code_qualname},
      {"code_object.firstlineno", 272 + 8 * 5, o.code_firstlineno},
      {"code_object.argcount", 272 + 8 * 6, o.code_argcount},
      {"code_object.localsplusnames", 272 + 8 * 7, layout.code_varnames},
      {"code_object.co_code_adaptive", 272 + 8 * 9, o.code_adaptive},
      {"unicode_object.asciiobject_size", 536 + 8 * 3, o.str_ascii_data},
  };
  for (const auto& c : checks) {
    if (u64_at(c.at) != c.expected)
      throw Error(ExitCode::unsupported, std::string("this CPython 3.13 build has an unexpected layout (") + c.what +
                                             " = " + std::to_string(u64_at(c.at)) + ", expected " +
                                             std::to_string(c.expected) + ")");
  }
}

}  // namespace lt::python
