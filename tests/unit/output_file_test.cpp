// Every output file: no symbolic links, no FIFOs or devices, no file of
// another user, a second trace recorder refused, and an old file of ours
// replaced (or appended to) only after all of that.
#include "user/core/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "user/core/errors.h"

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/lt-output-XXXXXX";
  return mkdtemp(tmpl);
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

lt::ExitCode code_of(const std::string& path, lt::OutputMode mode = lt::OutputMode::truncate) {
  try {
    lt::OutputFile f(path, mode);
    f.close();
  } catch (const lt::Error& e) {
    return e.code();
  }
  return lt::ExitCode::ok;
}

TEST(OutputFile, RefusesLinksFifosAndOthersFiles) {
  const std::string d = temp_dir();
  std::ofstream(d + "/victim") << "precious";
  ASSERT_EQ(symlink((d + "/victim").c_str(), (d + "/link").c_str()), 0);
  EXPECT_EQ(code_of(d + "/link"), lt::ExitCode::io);
  EXPECT_EQ(slurp(d + "/victim"), "precious");
  ASSERT_EQ(mkfifo((d + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(code_of(d + "/fifo"), lt::ExitCode::io);  // and does not hang without a reader
  std::ofstream(d + "/planted") << "theirs";
  if (geteuid() == 0) {
    ASSERT_EQ(chown((d + "/planted").c_str(), 65534, 65534), 0);
    EXPECT_EQ(code_of(d + "/planted"), lt::ExitCode::io);
    EXPECT_EQ(slurp(d + "/planted"), "theirs");
  }
  EXPECT_EQ(code_of(d), lt::ExitCode::io);  // a directory
  std::system(("rm -rf " + d).c_str());
}

TEST(OutputFile, ReplacesOrAppendsOurOwn) {
  const std::string d = temp_dir();
  std::ofstream(d + "/out") << "old contents that are longer";
  {
    lt::OutputFile f(d + "/out");
    f.stream() << "new";
    f.close();
  }
  EXPECT_EQ(slurp(d + "/out"), "new");
  {
    lt::OutputFile f(d + "/out", lt::OutputMode::append);
    f.stream() << "+more";
    f.close();
  }
  EXPECT_EQ(slurp(d + "/out"), "new+more");
  std::system(("rm -rf " + d).c_str());
}

TEST(OutputFile, SecondExclusiveWriterIsRefused) {
  const std::string d = temp_dir();
  const int first = lt::open_output_fd(d + "/t.ltrace", lt::OutputMode::exclusive_truncate);
  ASSERT_GE(first, 0);
  EXPECT_EQ(code_of(d + "/t.ltrace", lt::OutputMode::exclusive_truncate), lt::ExitCode::io);
  close(first);
  EXPECT_EQ(code_of(d + "/t.ltrace", lt::OutputMode::exclusive_truncate), lt::ExitCode::ok);
  std::system(("rm -rf " + d).c_str());
}

}  // namespace
