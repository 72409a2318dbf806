// The command line as data: every option and every command declared once.
// The parser (getopt_long), the checks of which command takes which option,
// and the --help text are all generated from these two tables
// (user/cli/option_table.cpp, user/cli/commands.cpp), so they cannot drift
// apart; tests/unit/cli_table_test.cpp checks every row against both.
#pragma once
#include <span>
#include <string>

#include "user/cli/options.h"

namespace lt {

// A set of commands, one bit per Options::Command.
using CommandSet = unsigned;
constexpr CommandSet command_bit(Options::Command c) {
  return 1u << static_cast<unsigned>(c);
}

struct OptionSpec {
  const char* name;           // long name, without "--"
  char short_name = 0;        // 0: none
  const char* arg = nullptr;  // the value's name in --help (PID, FILE); nullptr: a flag
  CommandSet commands = 0;    // the commands that take it
  const char* help = "";      // one paragraph; usage_text() wraps it
  // Text generated from another table, appended to help (--report's names).
  std::string (*help_from_table)() = nullptr;
  // Checks the value and stores it (flags get ""); throws Error(usage).
  void (*store)(Options&, const std::string& value) = nullptr;
  const char* example = nullptr;  // a valid value (the table test parses every row with it)
  // Said when a command that does not take it is given it; nullptr: the
  // command's own words (CommandSpec::refusal).
  const char* refusal = nullptr;
  const char* needs = nullptr;    // the long name of an option it only works with ("a|b": any one of them)
  CommandSet stands_alone = 0;    // commands where it needs nothing (diff's --steps: what to compare)
  bool passed_on = false;         // cluster: given on to every agent as typed
  const char* heading = nullptr;  // --help: a section that starts at this row
};

struct CommandSpec {
  const char* name;  // the word after ltrace-bpf; "" for the default (live attach)
  Options::Command id;
  const char* synopsis;  // --help: how it is called
  const char* summary;   // --help: one line, what it does
  // Said when given an option it does not take; "{}" is the option as typed.
  const char* refusal;
  bool strict;  // its refusal wins over the option's own (ps takes almost nothing)
  // After parsing: what the command needs, and its defaults; throws Error(usage).
  void (*check)(Options&);
  int (*run)(Options&);  // the command; returns the exit code
};

std::span<const OptionSpec> option_table();
std::span<const CommandSpec> command_table();
const CommandSpec& command_spec(Options::Command id);

}  // namespace lt
