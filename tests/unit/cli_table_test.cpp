// The command line is generated from two tables (user/cli/cli_table.h):
// every option row must be in --help, parse for exactly the commands it
// names and be refused by the others; --help must name no option the parser
// does not take.
#include "user/cli/cli_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <set>
#include <vector>

#include "user/core/errors.h"

namespace {

using lt::CommandSpec;
using lt::Options;
using lt::OptionSpec;

// Throws what parse_options throws.
Options parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  static std::string prog = "ltrace-bpf";
  argv.push_back(prog.data());
  for (auto& a : args) argv.push_back(a.data());
  return lt::parse_options(static_cast<int>(argv.size()), argv.data());
}

// The least each command needs to parse, before the option under test;
// an option that only applies to a mode of its command (cluster's dump,
// the agent's --dump-threads and --capture-via) gets that mode's.
std::vector<std::string> base_args(const CommandSpec& c, const OptionSpec& o) {
  std::vector<std::string> a;
  if (*c.name) a.push_back(c.name);
  switch (c.id) {
    case Options::Command::record:
      a.insert(a.end(), {"-o", "x.ltrace"});
      break;
    case Options::Command::report:
      a.push_back("f.ltrace");
      break;
    case Options::Command::diff:
      a.insert(a.end(), {"a.ltrace", "b.ltrace"});
      break;
    case Options::Command::agent:
      if (std::strcmp(o.name, "dump-threads") == 0 || std::strcmp(o.name, "capture-via") == 0)
        a.insert(a.end(), {"--job-env", "A=1"});
      else
        a.insert(a.end(), {"--job-env", "A=1", "-o", "x.ltrace"});
      break;
    case Options::Command::cluster:
      if (std::strcmp(o.name, "json") == 0)
        a.insert(a.end(), {"--slurm-job", "4", "dump"});
      else if ((o.commands & lt::command_bit(Options::Command::watch)) &&
               !(o.commands & lt::command_bit(Options::Command::agent)))  // watch's own: cluster ... watch
        a.insert(a.end(), {"--slurm-job", "4", "watch"});
      else
        a.insert(a.end(), {"--slurm-job", "4", "-o", "t"});
      break;
    case Options::Command::dump:
      a.insert(a.end(), {"--pid", "1"});
      break;
    default:
      break;
  }
  return a;
}

const OptionSpec& row_named(const char* name) {
  for (const OptionSpec& o : lt::option_table())
    if (std::strcmp(o.name, name) == 0) return o;
  throw std::runtime_error(std::string("no option --") + name);
}

// The option (as `flag`), its example value, and what it needs.
std::vector<std::string> with_option(const CommandSpec& c, const OptionSpec& o, const std::string& flag) {
  auto a = base_args(c, o);
  a.push_back(flag);
  if (o.arg) a.push_back(o.example);
  if (o.needs && !(o.stands_alone & lt::command_bit(c.id))) {  // "a|b": the first
    const OptionSpec& other = row_named(std::string(o.needs).substr(0, std::string(o.needs).find('|')).c_str());
    a.push_back(std::string("--") + other.name);
    if (other.arg) a.push_back(other.example);
  }
  if (c.id == Options::Command::run) a.insert(a.end(), {"--", "true"});
  return a;
}

std::string help_flags(const OptionSpec& o) {
  std::string f = o.short_name ? std::string("-") + o.short_name + ", " : "";
  f += std::string("--") + o.name;
  if (o.arg) f += std::string(" ") + o.arg;
  return f;
}

}  // namespace

TEST(CliTable, RowsAreWellFormed) {
  std::set<std::string> names;
  std::set<char> shorts;
  for (const OptionSpec& o : lt::option_table()) {
    EXPECT_TRUE(names.insert(o.name).second) << "--" << o.name << " twice";
    if (o.short_name) {
      EXPECT_TRUE(shorts.insert(o.short_name).second) << "-" << o.short_name << " twice";
    }
    EXPECT_TRUE(o.store) << "--" << o.name << " stores nothing";
    EXPECT_TRUE(o.help && *o.help) << "--" << o.name << " has no help";
    EXPECT_NE(o.commands, 0u) << "--" << o.name << " is taken by no command";
    if (o.arg) {
      EXPECT_TRUE(o.example) << "--" << o.name << " has no example value";
    }
    if (o.needs) {
      std::string rest = std::string(o.needs) + "|";
      for (auto bar = rest.find('|'); bar != std::string::npos; rest.erase(0, bar + 1), bar = rest.find('|'))
        EXPECT_NO_THROW(row_named(rest.substr(0, bar).c_str())) << o.needs;
    }
  }
  for (const CommandSpec& c : lt::command_table()) EXPECT_EQ(&lt::command_spec(c.id), &c);
}

TEST(CliTable, EveryOptionIsInHelp) {
  const std::string help = lt::usage_text();
  for (const OptionSpec& o : lt::option_table()) {
    // In the flags column: its text follows on the line, or the next one.
    const std::string flags = "  " + help_flags(o);
    EXPECT_TRUE(help.find(flags + " ") != std::string::npos || help.find(flags + "\n") != std::string::npos)
        << help_flags(o) << " missing from --help";
  }
  // Summaries are wrapped: compare with every run of blanks as one space.
  const std::string flat = std::regex_replace(help, std::regex("\\s+"), " ");
  for (const CommandSpec& c : lt::command_table()) {
    EXPECT_NE(help.find(c.synopsis), std::string::npos) << c.synopsis;
    const std::string line = std::string(" ") + (*c.name ? c.name : "(none)") + " " + c.summary;
    EXPECT_NE(flat.find(line), std::string::npos) << line;
  }
}

TEST(CliTable, HelpNamesOnlyOptionsTheParserTakes) {
  const std::string help = lt::usage_text();
  const std::regex flag("(^|[^a-zA-Z0-9_-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?=[ ,.;:=)\\]/|\\n])");
  std::set<std::string> seen;
  for (std::sregex_iterator it(help.begin(), help.end(), flag), end; it != end; ++it) seen.insert((*it)[2]);
  ASSERT_GT(seen.size(), 30u);
  for (const std::string& f : seen) {
    bool known = false;
    for (const OptionSpec& o : lt::option_table())
      known |= f == std::string("--") + o.name || (o.short_name && f == std::string("-") + o.short_name);
    EXPECT_TRUE(known) << "--help names " << f << ", which the parser does not take";
  }
}

TEST(CliTable, EveryOptionParsesForItsCommandsOnly) {
  for (const OptionSpec& o : lt::option_table())
    for (const CommandSpec& c : lt::command_table()) {
      std::vector<std::string> flags = {std::string("--") + o.name};
      if (o.short_name) flags.push_back(std::string("-") + o.short_name);
      for (const std::string& f : flags) {
        const auto args = with_option(c, o, f);
        std::string joined;
        for (auto& a : args) joined += a + " ";
        if (o.commands & lt::command_bit(c.id)) {
          EXPECT_NO_THROW(EXPECT_EQ(parse(args).command, c.id)) << joined;
          continue;
        }
        try {
          parse(args);
          ADD_FAILURE() << "accepted " << joined;
        } catch (const lt::Error& e) {
          EXPECT_EQ(e.code(), lt::ExitCode::usage) << joined;
          // The option's own words, or the command's naming the option as typed.
          const std::string what = e.what();
          if (c.strict || !o.refusal) {
            EXPECT_NE(what.find(f), std::string::npos) << joined << ": " << what;
          } else {
            EXPECT_EQ(what, o.refusal) << joined;
          }
        }
      }
    }
}

TEST(CliTable, OnlyWholeNamesAndValuesWhereTaken) {
  auto code_of = [](std::vector<std::string> a) {
    try {
      parse(std::move(a));
    } catch (const lt::Error& e) {
      return e.code();
    }
    return lt::ExitCode::ok;
  };
  EXPECT_EQ(code_of({"--pid", "1", "--dur", "5"}), lt::ExitCode::usage);  // getopt_long would take a prefix
  EXPECT_EQ(code_of({"--pid", "1", "--duration", "5"}), lt::ExitCode::ok);
  EXPECT_EQ(code_of({"--pid", "1", "--off-cpu=yes"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--pid", "1", "-x"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--pid", "1", "stray"}), lt::ExitCode::usage);
  EXPECT_EQ(code_of({"--pid", "1", "--", "python"}), lt::ExitCode::usage);  // only run takes a command
  EXPECT_EQ(parse({"--pid", "1", "-cv"}).verbose, true);
  try {
    parse({"--pid"});
    FAIL();
  } catch (const lt::Error& e) {
    EXPECT_EQ(std::string(e.what()), "option --pid needs a value");
  }
  try {
    parse({"--bogus=1"});
    FAIL();
  } catch (const lt::Error& e) {
    EXPECT_EQ(std::string(e.what()), "unknown option '--bogus' (see --help)");
  }
  // report's FILE may stand after its options; "-" is standard input.
  EXPECT_EQ(parse({"report", "--report", "ops", "-"}).input, "-");
  // cluster gives short flags on too, as typed.
  EXPECT_EQ(parse({"cluster", "--slurm-job", "4", "-o", "t", "-c", "-v"}).agent_args,
            (std::vector<std::string>{"-c", "-v"}));
}

TEST(CliTable, ClusterWatchTakesWatchOptionsOnly) {
  // cluster ... watch gives watch's options to every node's watcher, as
  // typed; the recorder's options are refused there, and watch's without it.
  const auto o =
      parse({"cluster", "--slurm-job", "4", "watch", "--keep", "5m", "--triggers", "stall", "-v", "--dir", "/tmp/w"});
  EXPECT_TRUE(o.cluster_watch);
  EXPECT_EQ(o.watch_dir, "/tmp/w");
  EXPECT_EQ(o.agent_args, (std::vector<std::string>{"--keep", "5m", "--triggers", "stall", "-v"}));
  auto refused = [](std::vector<std::string> a) {
    try {
      parse(std::move(a));
    } catch (const lt::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(
      refused({"cluster", "--slurm-job", "4", "watch", "--report", "ops"}).find("--report does not apply to watch"),
      std::string::npos);
  EXPECT_NE(refused({"cluster", "--slurm-job", "4", "watch", "-o", "d"}).find("-o, --gather"), std::string::npos);
  EXPECT_NE(refused({"cluster", "--slurm-job", "4", "-o", "d", "--stall", "60s"}).find("--stall applies to watch"),
            std::string::npos);
}
