// Command-line parsing.  Errors are lt::Error(usage) with one line of text.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace lt {

struct Options {
  enum class Command { live, record, report } command = Command::live;
  std::vector<pid_t> pids;
  std::string output;  // -o FILE: trace file (record: required; live: optional)
  std::string input;   // report FILE
  bool children = false;
  double duration_s = 0;
  bool extended = true;
  std::string dirpath, filename;
  std::string report = "simple";
  bool verbose = false;
  std::string dump_path;
  std::string chrome_path, html_path;  // exports  // --dump FILE: every record as text
  bool help = false, version = false;
};

Options parse_options(int argc, char** argv);
std::string usage_text();

}  // namespace lt
