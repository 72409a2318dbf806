// Lines from a child's pipe (an agent's stdout or stderr), read as they come.
#pragma once
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <string>

namespace lt::cluster {

// Reads what `fd` has now and hands each complete line to `on_line`.  At
// end of file (or an error) closes fd, sets it to -1 and hands over the last
// line even if unterminated.  False if the read was interrupted (nothing read).
inline bool drain_lines(int& fd, std::string& buf, const std::function<void(std::string)>& on_line) {
  char chunk[65536];
  const ssize_t r = read(fd, chunk, sizeof chunk);
  if (r < 0 && errno == EINTR) return false;
  if (r <= 0) {
    if (!buf.empty()) buf += '\n';
    close(fd);
    fd = -1;
  } else {
    buf.append(chunk, static_cast<std::size_t>(r));
  }
  std::size_t at = 0, nl;
  while ((nl = buf.find('\n', at)) != std::string::npos) {
    std::string line = buf.substr(at, nl - at);
    at = nl + 1;
    on_line(std::move(line));
  }
  buf.erase(0, at);
  return true;
}

}  // namespace lt::cluster
