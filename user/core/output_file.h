// Opening a file to write, as root on a shared machine: never through a
// symbolic link, never into something that is not a plain file (a FIFO, a
// device), and never into a file that another user created (planted where
// we were told to write).  Every file ltrace-bpf writes goes through here.
#pragma once
#include <ext/stdio_filebuf.h>
#include <memory>
#include <ostream>
#include <string>

namespace lt {

enum class OutputMode { truncate, append, exclusive_truncate /* + an flock no second writer gets */ };

// A checked file descriptor, open for writing.  Throws lt::Error(io) with
// the reason.
int open_output_fd(const std::string& path, OutputMode mode);

// The same as a std::ostream.  close() flushes and throws lt::Error(io) if
// anything could not be written.
class OutputFile {
 public:
  OutputFile(const std::string& path, OutputMode mode = OutputMode::truncate);
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
