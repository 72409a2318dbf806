#include "user/core/output_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "user/core/errors.h"

namespace lt {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw Error(ExitCode::unsafe_output, "not writing " + path + ": " + why);
}

[[noreturn]] void cannot(const std::string& what, const std::string& path, int err) {
  throw Error(ExitCode::io, what + " " + path + ": " + std::strerror(err));
}

// A file or link of this user may be written or followed: ours, or the
// invoking user's under sudo.  Root's links (e.g. /var/tmp -> /tmp set up
// by the administrator) may be followed too.
bool ours(uid_t uid) {
  const auto inv = invoking_user();
  return uid == geteuid() || (inv && uid == inv->uid);
}

// Every symbolic link on the way to `dir` (and on the way through their
// targets) must be root's or ours: a link another user planted in a shared
// directory would send what we write where they chose.
void check_links_on_the_way(const std::string& dir, const std::string& path, int depth = 0) {
  if (depth > 40) refuse(path, "too many levels of symbolic links in " + dir);
  fs::path prefix;
  for (const auto& part : fs::path(dir)) {
    prefix /= part;
    struct stat st {};
    if (lstat(prefix.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) continue;
    if (st.st_uid != 0 && !ours(st.st_uid))
      refuse(path, prefix.string() + " is a symbolic link of another user (uid " + std::to_string(st.st_uid) + ")");
    char target[PATH_MAX];
    const ssize_t n = readlink(prefix.c_str(), target, sizeof target - 1);
    if (n < 0) continue;
    target[n] = '\0';
    fs::path t(target);
    if (t.is_relative()) t = prefix.parent_path() / t;
    check_links_on_the_way(t.string(), path, depth + 1);
  }
}

int openat2_dir(const std::string& dir) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS;
  return static_cast<int>(syscall(SYS_openat2, AT_FDCWD, dir.c_str(), &how, sizeof how));
}

// The directory the file goes in, opened so that nothing can swap a link in
// under us afterwards: openat2(RESOLVE_NO_SYMLINKS) on the path with every
// trusted link resolved.
int open_parent(const std::string& path) {
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int fd = openat2_dir(dir);
  if (fd >= 0) return fd;
  if (errno != ELOOP && errno != ENOSYS && errno != EXDEV) cannot("cannot create", path, errno);
  const bool have_openat2 = errno != ENOSYS;
  check_links_on_the_way(dir, path);
  char resolved[PATH_MAX];
  if (!realpath(dir.c_str(), resolved)) cannot("cannot create", path, errno);
  fd = have_openat2 ? openat2_dir(resolved) : open(resolved, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 && errno == ELOOP) refuse(path, "a symbolic link appeared in " + dir + " while it was opened");
  if (fd < 0) cannot("cannot create", path, errno);
  return fd;
}

}  // namespace

std::optional<InvokingUser> invoking_user() {
  if (geteuid() != 0) return std::nullopt;
  const char* u = std::getenv("SUDO_UID");
  const char* g = std::getenv("SUDO_GID");
  if (!u || !g || !*u || !*g) return std::nullopt;
  char* end = nullptr;
  const unsigned long uid = std::strtoul(u, &end, 10);
  if (*end) return std::nullopt;
  const unsigned long gid = std::strtoul(g, &end, 10);
  if (*end || uid == 0) return std::nullopt;
  return InvokingUser{static_cast<uid_t>(uid), static_cast<gid_t>(gid)};
}

void make_output_dirs(const std::string& dir) {
  if (dir.empty()) return;
  fs::path prefix;
  for (const auto& part : fs::path(dir)) {
    prefix /= part;
    if (mkdir(prefix.c_str(), 0755) == 0) {
      if (const auto inv = invoking_user()) (void)!chown(prefix.c_str(), inv->uid, inv->gid);
    } else if (errno != EEXIST) {
      cannot("cannot create", prefix.string(), errno);
    }
  }
}

int open_output_fd(const std::string& path, OutputMode mode, OutputAccess access) {
  const int dirfd = open_parent(path);
  const std::string base = fs::path(path).filename().string();
  if (base.empty() || base == "." || base == "..") {
    ::close(dirfd);
    throw Error(ExitCode::io, "cannot create " + path + ": not a file name");
  }
  // O_NONBLOCK: opening a FIFO with no reader fails instead of hanging (it
  // is refused below anyway); it is cleared again for the plain file.
  int flags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  if (mode == OutputMode::append) flags |= O_APPEND;
  const mode_t perm = access == OutputAccess::owner_only ? 0600 : 0644;
  bool created = false;
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 3; ++tries) {
    fd = openat(dirfd, base.c_str(), flags | O_CREAT | O_EXCL, perm);
    if (fd >= 0) {
      created = true;
    } else if (errno == EEXIST) {
      fd = openat(dirfd, base.c_str(), flags);  // ENOENT: it went away again; retry
      if (fd < 0 && errno != ENOENT) break;
    } else {
      break;
    }
  }
  const int e = errno;
  ::close(dirfd);
  if (fd < 0) {
    if (e == ELOOP) refuse(path, "it is a symbolic link");
    if (e == ENXIO) refuse(path, "it is not a regular file");  // a FIFO without a reader
    cannot("cannot create", path, e);
  }
  auto fail = [&](const std::string& why) {
    ::close(fd);
    refuse(path, why);
  };
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    cannot("cannot write", path, err);
  }
  if (!S_ISREG(st.st_mode)) fail("it is not a regular file");
  if (!ours(st.st_uid))
    fail("it belongs to another user (uid " + std::to_string(st.st_uid) + "): remove it or choose another name");
  // A second name for the file may be anyone's planted link to a file of ours.
  if (st.st_nlink > 1) fail("it has " + std::to_string(st.st_nlink - 1) + " other hard link(s)");
  // Held until the descriptor is closed.
  if (mode == OutputMode::exclusive_truncate && flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw Error(ExitCode::io, "not writing " + path + ": another ltrace-bpf is writing it");
  }
  // A trace is private even when an older file of ours was not.
  if (access == OutputAccess::owner_only && (st.st_mode & 0077) != 0 && fchmod(fd, 0600) != 0) {
    const int err = errno;
    ::close(fd);
    cannot("cannot write", path, err);
  }
  if (created) {
    if (const auto inv = invoking_user()) (void)!fchown(fd, inv->uid, inv->gid);
  }
  // Only now, after every check, is an old file of ours emptied.
  if (mode != OutputMode::append && ftruncate(fd, 0) != 0) {
    const int err = errno;
    ::close(fd);
    cannot("cannot write", path, err);
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

OutputFile::OutputFile(const std::string& path, OutputMode mode, OutputAccess access) : path_(path), out_(nullptr) {
  const int fd = open_output_fd(path, mode, access);
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

std::size_t give_files_to(const std::string& dir, uid_t uid) {
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) throw Error(ExitCode::io, "cannot open " + dir + ": " + std::strerror(errno));
  DIR* d = fdopendir(dfd);
  if (!d) {
    const int e = errno;
    close(dfd);
    throw Error(ExitCode::io, "cannot read " + dir + ": " + std::strerror(e));
  }
  gid_t gid = static_cast<gid_t>(-1);  // unchanged, when the user has no passwd entry
  passwd pw{}, *found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) gid = pw.pw_gid;
  std::size_t n = 0;
  while (dirent* e = readdir(d)) {
    struct stat st {};
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) continue;
    if (fchownat(dfd, e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) == 0) ++n;
  }
  closedir(d);
  return n;
}

}  // namespace lt
