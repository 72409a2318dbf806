// The parser and --help, both generated from the option and command tables
// (user/cli/cli_table.h).  Parsing is getopt_long in argument order ("-"):
// a command's positional argument (report FILE) may stand anywhere, and
// `run ... -- COMMAND` ends at "--".
#include "user/cli/options.h"

#include <getopt.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "user/cli/cli_table.h"
#include "user/core/errors.h"

namespace lt {
namespace {

constexpr int kFirstLongValue = 256;  // getopt_long's value for row i: kFirstLongValue + i
constexpr size_t kHelpColumn = 24;    // --help: where an option's text starts
constexpr size_t kWidth = 79;

Error usage_error(const std::string& what) {
  return Error(ExitCode::usage, what);
}

// OptionSpec::needs "a|b|c" -> a, b, c
std::vector<std::string> split_alternatives(const std::string& s) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (auto bar = s.find('|'); bar != std::string::npos; from = bar + 1, bar = s.find('|', from))
    out.push_back(s.substr(from, bar - from));
  out.push_back(s.substr(from));
  return out;
}

std::string flag_name(const OptionSpec& o) {
  return std::string("--") + o.name;
}

// The option as the user typed it: "--pid", "-p" (a value after '=' left
// out).  `short_char`: the short option met, or 0 for the long one at argv[at].
std::string typed(char** argv, int at, int short_char) {
  if (short_char > 0 && short_char < kFirstLongValue) return std::string("-") + static_cast<char>(short_char);
  std::string t = argv[at];
  if (auto eq = t.find('='); eq != std::string::npos) t.resize(eq);
  return t;
}

const CommandSpec& find_command(int argc, char** argv, int& first) {
  first = 1;
  if (argc > 1)
    for (const CommandSpec& c : command_table())
      if (*c.name && std::strcmp(argv[1], c.name) == 0) {
        first = 2;
        return c;
      }
  return command_spec(Options::Command::live);
}

std::string refusal(const CommandSpec& cmd, const OptionSpec& row, const std::string& as_typed) {
  std::string text = cmd.strict || !row.refusal ? cmd.refusal : row.refusal;
  if (auto at = text.find("{}"); at != std::string::npos) text.replace(at, 2, as_typed);
  return text;
}

// Words of `text` filled into lines of `width`, each line after the first
// starting at `indent`.
std::string wrap(const std::string& text, size_t width, size_t indent, size_t first_column) {
  std::string out;
  size_t column = first_column;
  size_t at = 0;
  bool line_empty = true;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    if (!line_empty && column + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    line_empty = false;
  }
  return out;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  int first = 1;
  const CommandSpec& cmd = find_command(argc, argv, first);
  o.command = cmd.id;
  const auto table = option_table();

  std::vector<option> longopts;
  std::string shortopts = "-:";  // arguments in order; ':' reports a missing value apart
  for (size_t i = 0; i < table.size(); ++i) {
    longopts.push_back({table[i].name, table[i].arg ? required_argument : no_argument, nullptr,
                        kFirstLongValue + static_cast<int>(i)});
    if (table[i].short_name) shortopts += std::string(1, table[i].short_name) + (table[i].arg ? ":" : "");
  }
  longopts.push_back({nullptr, 0, nullptr, 0});
  auto row_of_short = [&](int c) -> int {
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].short_name && table[i].short_name == c) return static_cast<int>(i);
    return -1;
  };

  std::vector<bool> given(table.size(), false);
  // getopt_long keeps its state in globals; optind 0 starts it afresh.
  optind = 0;
  opterr = 0;
  const int sub_argc = argc - (first - 1);
  char** sub_argv = argv + (first - 1);  // sub_argv[0] stands for the program name
  for (;;) {
    const int before = optind == 0 ? 1 : optind;
    const int c = getopt_long(sub_argc, sub_argv, shortopts.c_str(), longopts.data(), nullptr);
    if (c == -1) {
      // Stopped at "--": the rest is run's command, and nothing for the others.
      if (before < sub_argc) {
        if (o.command != Options::Command::run) throw usage_error("unknown option '--' (see --help)");
        o.run_argv.assign(sub_argv + optind, sub_argv + sub_argc);
      }
      break;
    }
    if (c == 1) {  // a positional argument: report's FILE ("-" is standard input)
      if (o.command == Options::Command::report && o.input.empty()) {
        o.input = optarg;
        continue;
      }
      if (o.command == Options::Command::diff) {
        (o.diff_vs ? o.diff_b : o.diff_a).push_back(optarg);
        continue;
      }
      if (o.command == Options::Command::cluster && !o.cluster_dump && !o.cluster_watch && !o.cluster_capture &&
          std::strcmp(optarg, "dump") == 0) {
        o.cluster_dump = true;
        continue;
      }
      if (o.command == Options::Command::cluster && !o.cluster_dump && !o.cluster_watch && !o.cluster_capture &&
          std::strcmp(optarg, "watch") == 0) {
        o.cluster_watch = true;
        continue;
      }
      if (o.command == Options::Command::cluster && !o.cluster_dump && !o.cluster_watch && !o.cluster_capture &&
          std::strcmp(optarg, "capture") == 0) {
        o.cluster_capture = true;
        continue;
      }
      if (o.command == Options::Command::ps) throw usage_error(refusal(cmd, table[0], optarg));
      throw usage_error("unknown option '" + std::string(optarg) + "' (see --help)");
    }
    if (c == '?') {
      // optopt: a known long option given a value it does not take; else unknown.
      if (optopt >= kFirstLongValue) throw usage_error("option " + typed(sub_argv, before, 0) + " takes no value");
      throw usage_error("unknown option '" + typed(sub_argv, before, optopt) + "' (see --help)");
    }
    const int value = c == ':' ? optopt : c;  // ':': the option whose value is missing
    const bool is_short = value < kFirstLongValue;
    const OptionSpec& spec = table[is_short ? row_of_short(value) : value - kFirstLongValue];
    const std::string as_typed = typed(sub_argv, before, is_short ? value : 0);
    // Only whole names: getopt_long would take "--dur" for --duration.
    if (!is_short && as_typed != flag_name(spec)) throw usage_error("unknown option '" + as_typed + "' (see --help)");
    if (!(spec.commands & command_bit(o.command))) throw usage_error(refusal(cmd, spec, as_typed));
    if (c == ':') throw usage_error("option " + as_typed + " needs a value");
    spec.store(o, spec.arg ? std::string(optarg) : std::string());
    given[&spec - table.data()] = true;
    // cluster: the record options go on to every agent as given.
    if (o.command == Options::Command::cluster && spec.passed_on) {
      o.agent_arg_specs.emplace_back(as_typed, spec.commands);
      if (is_short) {
        o.agent_args.push_back(as_typed);
        if (spec.arg) o.agent_args.push_back(optarg);
      } else {
        o.agent_args.push_back(sub_argv[before]);
        if (spec.arg && optind == before + 2) o.agent_args.push_back(sub_argv[before + 1]);
      }
    }
  }
  if (o.help || o.version) return o;
  auto row_named = [&](std::string_view name) {
    return std::find_if(table.begin(), table.end(), [&](const OptionSpec& s) { return s.name == name; });
  };
  for (size_t i = 0; i < table.size(); ++i) {
    if (!given[i] || !table[i].needs || (table[i].stands_alone & command_bit(o.command))) continue;
    // "a|b|c": any one of them.
    if (std::strchr(table[i].needs, '|')) {
      const std::vector<std::string> any = split_alternatives(table[i].needs);
      std::string names;
      bool one = false;
      for (std::size_t k = 0; k < any.size(); ++k) {
        const auto row = row_named(any[k]);
        if (row == table.end())
          throw Error(ExitCode::internal, flag_name(table[i]) + " needs --" + any[k] + ", which is no option");
        one |= given[row - table.begin()];
        names += (k == 0 ? "" : k + 1 == any.size() ? " or " : ", ") + flag_name(*row);
      }
      if (!one) throw usage_error(flag_name(table[i]) + " needs " + names);
      continue;
    }
    auto other = std::find_if(table.begin(), table.end(),
                              [&](const OptionSpec& s) { return std::strcmp(s.name, table[i].needs) == 0; });
    if (other == table.end())
      throw Error(ExitCode::internal, flag_name(table[i]) + " needs --" + table[i].needs + ", which is no option");
    const bool mutual = other->needs && std::strcmp(other->needs, table[i].name) == 0;
    if (!given[other - table.begin()])
      throw usage_error(mutual ? flag_name(table[std::min<size_t>(i, other - table.begin())]) + " and " +
                                     flag_name(table[std::max<size_t>(i, other - table.begin())]) + " go together"
                               : flag_name(table[i]) + " needs " + flag_name(*other));
  }
  cmd.check(o);
  return o;
}

std::string usage_text() {
  std::string out;
  bool first = true;
  for (const CommandSpec& c : command_table()) {
    out += std::string(first ? "usage: " : "       ") + c.synopsis + "\n";
    first = false;
  }
  out += "\ncommands:\n";
  for (const CommandSpec& c : command_table()) {
    std::string name = std::string("  ") + (*c.name ? c.name : "(none)");
    name.resize(11, ' ');
    out += name + wrap(c.summary, kWidth, 11, 11) + "\n";
  }
  out += R"(
Attach to running PyTorch Lightning jobs from outside (eBPF) and print the
report Lightning's SimpleProfiler would have printed for the attach window.
The target needs no restart and no code change; stop with Ctrl-C, SIGTERM,
--duration, or when every target has exited.  `record` keeps everything in a
trace file instead; `report` (no root or BPF needed) prints the same reports
from it later, on any machine.  `run` starts COMMAND itself, with the GPU
bridge preloaded (CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH: CUPTI and
NVTX from the first call) and every descendant followed.

options:
)";
  std::string passed_on;
  for (const OptionSpec& o : option_table()) {
    if (o.heading) out += "\n" + wrap(o.heading, kWidth, 0, 0) + "\n";
    std::string flags = o.short_name ? std::string("  -") + o.short_name + ", " : std::string("      ");
    flags += flag_name(o);
    if (o.arg) flags += std::string(" ") + o.arg;
    if (flags.size() + 1 > kHelpColumn) {
      out += flags + "\n" + std::string(kHelpColumn, ' ');
    } else {
      flags.resize(kHelpColumn, ' ');
      out += flags;
    }
    out +=
        wrap(std::string(o.help) + (o.help_from_table ? o.help_from_table() : ""), kWidth, kHelpColumn, kHelpColumn) +
        "\n";
    if (o.passed_on) passed_on += (passed_on.empty() ? "" : ", ") + flag_name(o);
  }
  out += "\n" + wrap("cluster gives these options on to every agent, as typed: " + passed_on + ".", kWidth, 0, 0);
  out += "\n\nexit codes:\n";
  for (const auto& e : kExitCodeTexts)
    out += "  " + wrap(std::to_string(static_cast<int>(e.code)) + " " + e.says, kWidth, 5, 2) + "\n";
  // An audit took run's 3 for "no such process": it was the job's own.
  out += wrap(
             "run exits with its command's own status where the command failed (its stderr line says \"the "
             "command exited with status N\"; killed by signal S: 128 + S), as a shell would: any of the codes "
             "above may then be the job's.",
             kWidth, 0, 0) +
         "\n";
  return out;
}

}  // namespace lt
