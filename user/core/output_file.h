// Opening a file to write, as root on a shared machine: never through a
// symbolic link that someone else planted (in the final component: never;
// in a directory of the path: only links owned by root or by the user who
// ran sudo), never through a hard link, never into something that is not a
// plain file (a FIFO, a device), and never into a file that another user
// created where we were told to write.  Refusals are lt::Error(unsafe_output).
// Under sudo, what we create belongs to the invoking user (SUDO_UID /
// SUDO_GID), as perf does with perf.data.  Every file ltrace-bpf writes
// goes through here.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <ext/stdio_filebuf.h>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

namespace lt {

enum class OutputMode { truncate, append, exclusive_truncate /* + an flock no second writer gets */ };

// Who may read it: reports are 0644; traces hold command lines and
// environments, so they are 0600 like perf.data.
enum class OutputAccess { shared, owner_only };

// The user on whose behalf we write: SUDO_UID/SUDO_GID when root was
// reached through sudo, else nothing (files stay ours).
struct InvokingUser {
  uid_t uid;
  gid_t gid;
};
std::optional<InvokingUser> invoking_user();

// A checked file descriptor, open for writing.  Throws lt::Error(io) when
// the file cannot be created or written, lt::Error(unsafe_output) when it
// is refused for safety, each with the reason.
int open_output_fd(const std::string& path, OutputMode mode, OutputAccess access = OutputAccess::shared);

// mkdir -p for an output directory; what it creates belongs to the invoking
// user.  Throws lt::Error(io).
void make_output_dirs(const std::string& dir);

// Hands the plain files directly in `dir` (not links, not directories, not
// files with other hard links) to `uid` and its primary group: a capture
// asked by a user, written by root into root's directory, becomes theirs.
// The directory itself stays ours (a user's directory would let them plant
// links where we write next). Returns how many files changed hands; throws
// lt::Error(io) when `dir` cannot be opened.
std::size_t give_files_to(const std::string& dir, uid_t uid);

// The same as a std::ostream.  close() flushes and throws lt::Error(io) if
// anything could not be written.
class OutputFile {
 public:
  OutputFile(const std::string& path, OutputMode mode = OutputMode::truncate,
             OutputAccess access = OutputAccess::shared);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  std::ostream& stream() { return out_; }
  void close();

 private:
  std::string path_;
  std::unique_ptr<__gnu_cxx::stdio_filebuf<char>> buf_;
  std::ostream out_;
};

void note_written(const std::string& path);  // "ltrace-bpf: wrote PATH" on stderr

// Writes one whole output file: writer(std::ostream&), then a note.
template <typename Writer>
void write_output(const std::string& path, Writer&& writer) {
  OutputFile f(path);
  writer(f.stream());
  f.close();
  note_written(path);
}

}  // namespace lt
