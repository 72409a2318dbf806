// ltrace-bpf: entry point.  Parses the command line (user/cli/options.h),
// runs the command from the command table (user/cli/commands.cpp).  Every
// failure ends as one line on stderr and a documented exit code (see
// --help); nothing escapes as an abort or a stack dump.
#include <iostream>
#include <string>

#include "user/cli/builtin.h"
#include "user/cli/options.h"
#include "user/cli/terminal_escape.h"
#include "user/cluster/agent.h"
#include "user/core/errors.h"

int main(int argc, char** argv) {
  using namespace lt;
  escape_controls_on_terminals();  // names from the target must not drive the terminal
  valid_utf8_on_std_streams();     // nor make the output invalid UTF-8
  // An agent's failures also go to the coordinator, as a status line.
  const bool agent = argc > 1 && std::string(argv[1]) == "agent";
  try {
    Options opts = parse_options(argc, argv);
    return run_command(opts);
  } catch (const Error& e) {
    std::cerr << "ltrace-bpf: " << e.what() << "\n";
    if (agent)
      cluster::agent_say("failed", {{"code", std::to_string(static_cast<int>(e.code()))}, {"error", e.what()}});
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "ltrace-bpf: internal error: " << e.what() << "\n";
    if (agent) cluster::agent_say("failed", {{"code", "1"}, {"error", std::string("internal error: ") + e.what()}});
    return static_cast<int>(ExitCode::internal);
  }
}
