// Every output file: no symbolic links, no FIFOs or devices, no file of
// another user, a second trace recorder refused, and an old file of ours
// replaced (or appended to) only after all of that.
#include "user/core/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
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
  EXPECT_EQ(code_of(d + "/link"), lt::ExitCode::unsafe_output);
  EXPECT_EQ(slurp(d + "/victim"), "precious");
  ASSERT_EQ(mkfifo((d + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(code_of(d + "/fifo"), lt::ExitCode::unsafe_output);  // and does not hang without a reader
  std::ofstream(d + "/planted") << "theirs";
  if (geteuid() == 0) {
    ASSERT_EQ(chown((d + "/planted").c_str(), 65534, 65534), 0);
    EXPECT_EQ(code_of(d + "/planted"), lt::ExitCode::unsafe_output);
    EXPECT_EQ(slurp(d + "/planted"), "theirs");
  }
  EXPECT_EQ(code_of(d), lt::ExitCode::io);  // a directory
  std::system(("rm -rf " + d).c_str());
}

// A user's capture, written by root, is handed to them: its plain files
// only; a link someone planted there (to a file of root's) and a file with
// another hard link stay as they were.
TEST(OutputFile, GivesOnlyPlainFilesOfADirectoryToAUser) {
  if (geteuid() != 0) GTEST_SKIP() << "chown needs root";
  const std::string d = temp_dir(), outside = temp_dir();
  std::ofstream(d + "/trace.ltrace") << "t";
  std::ofstream(d + "/reports.txt") << "r";
  std::ofstream(outside + "/roots") << "precious";
  ASSERT_EQ(symlink((outside + "/roots").c_str(), (d + "/link").c_str()), 0);
  ASSERT_EQ(link((outside + "/roots").c_str(), (d + "/hard").c_str()), 0);
  ASSERT_EQ(mkdir((d + "/sub").c_str(), 0755), 0);
  EXPECT_EQ(lt::give_files_to(d, 65534), 2u);
  auto owner = [](const std::string& p) {
    struct stat st {};
    lstat(p.c_str(), &st);
    return st.st_uid;
  };
  EXPECT_EQ(owner(d + "/trace.ltrace"), 65534u);
  EXPECT_EQ(owner(d + "/reports.txt"), 65534u);
  EXPECT_EQ(owner(outside + "/roots"), 0u);
  EXPECT_EQ(owner(d + "/link"), 0u);
  EXPECT_EQ(owner(d + "/sub"), 0u);
  EXPECT_EQ(owner(d), 0u);
  EXPECT_THROW(lt::give_files_to(d + "/link", 65534), lt::Error);  // not through a link either
  std::system(("rm -rf " + d + " " + outside).c_str());
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

// A scoped SUDO_UID/SUDO_GID, as sudo sets them.
struct SudoAs {
  SudoAs(const char* uid, const char* gid) {
    setenv("SUDO_UID", uid, 1);
    setenv("SUDO_GID", gid, 1);
  }
  ~SudoAs() {
    unsetenv("SUDO_UID");
    unsetenv("SUDO_GID");
  }
};

TEST(OutputFile, RefusesAHardLink) {
  const std::string d = temp_dir();
  std::ofstream(d + "/victim") << "precious";
  ASSERT_EQ(link((d + "/victim").c_str(), (d + "/hard").c_str()), 0);
  EXPECT_EQ(code_of(d + "/hard"), lt::ExitCode::unsafe_output);
  EXPECT_EQ(code_of(d + "/hard", lt::OutputMode::append), lt::ExitCode::unsafe_output);
  EXPECT_EQ(slurp(d + "/victim"), "precious");
  std::system(("rm -rf " + d).c_str());
}

TEST(OutputFile, FollowsADirectoryLinkOnlyIfRootsOrOurs) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (chown)";
  const std::string d = temp_dir();
  ASSERT_EQ(mkdir((d + "/elsewhere").c_str(), 0777), 0);
  // Another user's link to a directory: what we write would go where they chose.
  ASSERT_EQ(symlink((d + "/elsewhere").c_str(), (d + "/theirs").c_str()), 0);
  ASSERT_EQ(lchown((d + "/theirs").c_str(), 65534, 65534), 0);
  EXPECT_EQ(code_of(d + "/theirs/out.txt"), lt::ExitCode::unsafe_output);
  struct stat st {};
  EXPECT_NE(stat((d + "/elsewhere/out.txt").c_str(), &st), 0);
  // ...also behind a link of ours that points through theirs.
  ASSERT_EQ(symlink((d + "/theirs").c_str(), (d + "/mine").c_str()), 0);
  EXPECT_EQ(code_of(d + "/mine/out.txt"), lt::ExitCode::unsafe_output);
  // Our own link (or root's) is followed.
  ASSERT_EQ(symlink((d + "/elsewhere").c_str(), (d + "/ours").c_str()), 0);
  EXPECT_EQ(code_of(d + "/ours/out.txt"), lt::ExitCode::ok);
  EXPECT_EQ(stat((d + "/elsewhere/out.txt").c_str(), &st), 0);
  std::system(("rm -rf " + d).c_str());
}

TEST(OutputFile, TracesAreOwnerOnly) {
  const std::string d = temp_dir();
  const int fd = lt::open_output_fd(d + "/t.ltrace", lt::OutputMode::exclusive_truncate, lt::OutputAccess::owner_only);
  ASSERT_GE(fd, 0);
  close(fd);
  struct stat st {};
  ASSERT_EQ(stat((d + "/t.ltrace").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // An older trace of ours that others could read is made private.
  std::ofstream(d + "/old.ltrace") << "x";
  ASSERT_EQ(chmod((d + "/old.ltrace").c_str(), 0644), 0);
  lt::OutputFile f(d + "/old.ltrace", lt::OutputMode::truncate, lt::OutputAccess::owner_only);
  f.close();
  ASSERT_EQ(stat((d + "/old.ltrace").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A report stays readable.
  lt::OutputFile r(d + "/report.txt");
  r.close();
  ASSERT_EQ(stat((d + "/report.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0044, 0044u);
  std::system(("rm -rf " + d).c_str());
}

TEST(OutputFile, UnderSudoFilesAndDirectoriesBelongToTheInvokingUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (chown)";
  const std::string d = temp_dir();
  SudoAs sudo("65534", "65534");
  lt::make_output_dirs(d + "/a/b");
  struct stat st {};
  ASSERT_EQ(stat((d + "/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  ASSERT_EQ(stat((d + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_gid, 65534u);
  {
    lt::OutputFile f(d + "/a/b/fit-x.txt", lt::OutputMode::append);
    f.stream() << "one";
    f.close();
  }
  ASSERT_EQ(stat((d + "/a/b/fit-x.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  // The invoking user's own file is theirs to append to...
  EXPECT_EQ(code_of(d + "/a/b/fit-x.txt", lt::OutputMode::append), lt::ExitCode::ok);
  // ...a third user's is not.
  std::ofstream(d + "/a/b/third") << "z";
  ASSERT_EQ(chown((d + "/a/b/third").c_str(), 12345, 12345), 0);
  EXPECT_EQ(code_of(d + "/a/b/third"), lt::ExitCode::unsafe_output);
  std::system(("rm -rf " + d).c_str());
}

}  // namespace
