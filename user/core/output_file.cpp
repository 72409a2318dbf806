#include "user/core/output_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "user/core/errors.h"

namespace lt {

int open_output_fd(const std::string& path, OutputMode mode) {
  // O_NONBLOCK: opening a FIFO with no reader fails instead of hanging (it
  // is refused below anyway); it is cleared again for the plain file.
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  if (mode == OutputMode::append) flags |= O_APPEND;
  int fd = open(path.c_str(), flags, 0644);
  if (fd < 0) {
    const int e = errno;
    if (e == ELOOP) throw Error(ExitCode::io, "not writing " + path + ": it is a symbolic link");
    throw Error(ExitCode::io, "cannot create " + path + ": " + std::strerror(e));
  }
  auto refuse = [&](const std::string& why) {
    ::close(fd);
    throw Error(ExitCode::io, "not writing " + path + ": " + why);
  };
  struct stat st {};
  if (fstat(fd, &st) != 0) refuse(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) refuse("it is not a regular file");
  if (st.st_uid != geteuid())
    refuse("it belongs to another user (uid " + std::to_string(st.st_uid) + "): remove it or choose another name");
  // Held until the descriptor is closed.
  if (mode == OutputMode::exclusive_truncate && flock(fd, LOCK_EX | LOCK_NB) != 0)
    refuse("another ltrace-bpf is writing it");
  // Only now, after every check, is an old file of ours emptied.
  if (mode != OutputMode::append && ftruncate(fd, 0) != 0) refuse(std::strerror(errno));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

OutputFile::OutputFile(const std::string& path, OutputMode mode) : path_(path), out_(nullptr) {
  const int fd = open_output_fd(path, mode);
  buf_ = std::make_unique<__gnu_cxx::stdio_filebuf<char>>(fd, std::ios::out | std::ios::binary);
  out_.rdbuf(buf_.get());
}

OutputFile::~OutputFile() {
  if (buf_) buf_->close();
}

void OutputFile::close() {
  errno = 0;
  out_.flush();
  const bool ok = static_cast<bool>(out_) && buf_->close() != nullptr;
  int e = errno;  // of the failed flush or close
  buf_.reset();
  // A write that failed before close() left its errno to later calls: a
  // full file system is the common cause, and it can be seen.
  struct statvfs fs {};
  if (!ok && !e && statvfs(path_.c_str(), &fs) == 0 && fs.f_bavail == 0) e = ENOSPC;
  if (!ok) throw Error(ExitCode::io, "cannot write " + path_ + ": " + (e ? std::strerror(e) : "write error"));
}

void note_written(const std::string& path) {
  std::cerr << "ltrace-bpf: wrote " << path << "\n";
}

}  // namespace lt
