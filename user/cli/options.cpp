#include "user/cli/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "user/core/errors.h"

namespace lt {

std::string usage_text() {
  return R"(usage: ltrace-bpf --pid PID [--pid PID ...] [options]

Attach to running PyTorch Lightning jobs from outside (eBPF) and print the
report Lightning's SimpleProfiler would have printed for the attach window.
The target needs no restart and no code change; stop with Ctrl-C, SIGTERM,
--duration, or when every target has exited.

options:
  -p, --pid PID         process to attach to (repeatable)
  -c, --children        also follow every descendant (torchrun ranks,
                        DataLoader workers), including ones forked later
  -d, --duration SECS   detach after SECS seconds
      --report simple   which report (only "simple" so far)
      --no-extended     SimpleProfiler(extended=False) layout
      --dirpath DIR     with --filename: write Lightning's report files,
      --filename NAME     DIR/{stage}-NAME[-{local_rank}].txt (appended)
  -v, --verbose         attach details and notes on stderr
      --dump FILE       write every recorded event as one text line
  -h, --help            this text
  -V, --version         version

exit codes:
  0 ok   1 internal error   2 usage   3 no such process
  4 not a CPython process   5 unsupported CPython version or build
  6 missing privileges (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE)
  7 BPF load/attach failed   8 cannot write a report file
)";
}

namespace {

pid_t parse_pid(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v <= 0 || v > 4194304)
    throw Error(ExitCode::usage, "invalid pid '" + s + "': expected a positive number");
  return static_cast<pid_t>(v);
}

double parse_seconds(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v <= 0)
    throw Error(ExitCode::usage, "invalid duration '" + s + "': expected seconds > 0");
  return v;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  auto value = [&](int& i, const std::string& flag) -> std::string {
    if (i + 1 >= argc) throw Error(ExitCode::usage, "option " + flag + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string inline_value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0) {
      if (auto eq = a.find('='); eq != std::string::npos) {
        inline_value = a.substr(eq + 1);
        a = a.substr(0, eq);
        has_inline = true;
      }
    }
    auto arg = [&]() { return has_inline ? inline_value : value(i, a); };
    if (a == "-p" || a == "--pid")
      o.pids.push_back(parse_pid(arg()));
    else if (a == "-c" || a == "--children")
      o.children = true;
    else if (a == "-d" || a == "--duration")
      o.duration_s = parse_seconds(arg());
    else if (a == "--no-extended")
      o.extended = false;
    else if (a == "--dirpath")
      o.dirpath = arg();
    else if (a == "--filename")
      o.filename = arg();
    else if (a == "--report") {
      o.report = arg();
      if (o.report != "simple") throw Error(ExitCode::usage, "unknown report '" + o.report + "' (available: simple)");
    } else if (a == "-v" || a == "--verbose")
      o.verbose = true;
    else if (a == "--dump")
      o.dump_path = arg();
    else if (a == "-h" || a == "--help")
      o.help = true;
    else if (a == "-V" || a == "--version")
      o.version = true;
    else
      throw Error(ExitCode::usage, "unknown option '" + a + "' (see --help)");
  }
  if (o.help || o.version) return o;
  if (o.pids.empty()) throw Error(ExitCode::usage, "no target: give --pid PID (see --help)");
  if (o.dirpath.empty() != o.filename.empty()) throw Error(ExitCode::usage, "--dirpath and --filename go together");
  return o;
}

}  // namespace lt
