#include "user/proc/census.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <ctime>

#include "user/proc/procfs.h"
#include "user/text/numbers.h"

namespace lt::proc {

namespace {

std::string basename_of(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// A whole small /proc file (or the first `max` bytes); nullopt with errno
// set when it cannot be opened or read.
std::optional<std::string> read_small(const std::string& path, std::size_t max = 1 << 20) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[16384];
  while (out.size() < max) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      errno = err;
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

std::string pid_file(pid_t pid, const char* name) {
  return "/proc/" + std::to_string(pid) + "/" + name;
}

std::optional<std::string> read_link(const std::string& path) {
  char buf[4096];
  const ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

std::uint64_t now_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// A path as the target sees it, opened from here: absolute through its root,
// relative through its working directory.
std::string target_path(pid_t pid, const std::string& p) {
  if (!p.empty() && p[0] == '/') return root_path(pid, p);
  return pid_file(pid, "cwd") + "/" + p;
}

bool file_exists(const std::string& path) {
  return access(path.c_str(), F_OK) == 0;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  for (;;) {
    auto at = s.find(sep, pos);
    out.push_back(s.substr(pos, at == std::string::npos ? std::string::npos : at - pos));
    if (at == std::string::npos) return out;
    pos = at + 1;
  }
}

const char* const kLightningPackages[] = {"lightning", "pytorch_lightning"};

// The script or module a Python command line runs: the first argument that
// is not an option (-m's and -c's operand included).
std::string python_target(const std::vector<std::string>& argv) {
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if ((a == "-m" || a == "-c") && i + 1 < argv.size()) return argv[i + 1];
    if (starts_with(a, "-m") || starts_with(a, "-c")) return a.substr(2);
    if (a.empty() || a[0] != '-') return a;
  }
  return "";
}

// The directory of a Lightning package (as the target sees it) in one of
// `bases`, or "".
std::string find_lightning(pid_t pid, const std::vector<std::string>& bases) {
  for (const auto& base : bases)
    for (const char* pkg : kLightningPackages) {
      const std::string dir = (base.empty() ? "." : base) + "/" + pkg;
      if (file_exists(target_path(pid, dir + "/__init__.py"))) return dir;
    }
  return "";
}

std::vector<std::string> pythonpath_of(pid_t pid) {
  auto env = read_environ(pid);
  auto it = env.find("PYTHONPATH");
  if (it == env.end()) return {};
  return split(it->second, ':');
}

// The site directory holding a mapped libtorch: ".../site-packages" of
// ".../site-packages/torch/lib/libtorch_cpu.so".
std::string torch_site(const std::string& torch_lib) {
  auto at = torch_lib.find("/torch/lib/");
  return at == std::string::npos ? "" : torch_lib.substr(0, at);
}

std::string version_in_package(pid_t pid, const std::string& dir) {
  if (auto info = read_small(target_path(pid, dir + "/version.info"), 4096)) {
    auto v = trim(info->substr(0, info->find('\n')));
    if (!v.empty()) return v;
  }
  for (const char* f : {"/__about__.py", "/__version__.py", "/version.py", "/__init__.py"})
    if (auto text = read_small(target_path(pid, dir + f), 1 << 16))
      if (auto v = version_from_py(*text); !v.empty()) return v;
  // The wheel's dist-info next to the package.
  const auto slash = dir.rfind('/');
  const std::string base = slash == std::string::npos ? "." : dir.substr(0, slash);
  const std::string pkg = slash == std::string::npos ? dir : dir.substr(slash + 1);
  std::string found;
  if (DIR* d = opendir(target_path(pid, base).c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (starts_with(name, (pkg + "-").c_str()) && name.size() > 10 &&
          name.compare(name.size() - 10, 10, ".dist-info") == 0) {
        if (auto meta = read_small(target_path(pid, base + "/" + name + "/METADATA"), 1 << 16))
          found = version_from_metadata(*meta);
        if (!found.empty()) break;
      }
    }
    closedir(d);
  }
  return found;
}

std::string lightning_version(pid_t pid, const ProcessProbe& p) {
  std::vector<std::string> bases;
  if (p.maps.torch()) bases.push_back(torch_site(p.maps.torch_lib));
  for (auto& e : pythonpath_of(pid)) bases.push_back(e);
  std::string dir = p.lightning_dir.empty() ? find_lightning(pid, bases) : p.lightning_dir;
  if (dir.empty()) return "";
  auto v = version_in_package(pid, dir);
  return v.empty() ? "?" : v;
}

}  // namespace

// ---- pure parsers ----

std::optional<StatInfo> parse_stat(const std::string& text) {
  const auto lp = text.find('('), rp = text.rfind(')');
  if (lp == std::string::npos || rp == std::string::npos || rp < lp || rp + 2 >= text.size()) return std::nullopt;
  StatInfo s;
  s.comm = text.substr(lp + 1, rp - lp - 1);
  std::vector<std::string> f;
  std::size_t pos = rp + 2;
  while (pos < text.size() && f.size() < 21) {
    auto end = text.find_first_of(" \n", pos);
    if (end == std::string::npos) end = text.size();
    if (end > pos) f.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  // state ppid pgrp session tty tpgid flags ... starttime (field 22 = f[19]) vsize
  if (f.size() < 20 || f[0].size() != 1) return std::nullopt;
  try {
    s.state = f[0][0];
    s.ppid = static_cast<pid_t>(std::stol(f[1]));
    s.flags = static_cast<unsigned>(std::stoul(f[6]));
    s.starttime = std::stoull(f[19]);
    if (f.size() > 20) s.vsize = std::stoull(f[20]);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return s;
}

std::string container_id_from_cgroup(const std::string& cgroup) {
  for (const auto& line : split(cgroup, '\n')) {
    // hierarchy-ID:controllers:path
    const auto c1 = line.find(':');
    const auto c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string found;
    for (const auto& comp : split(line.substr(c2 + 1), '/')) {
      if (comp.find("conmon") != std::string::npos) continue;
      for (std::size_t i = 0; i < comp.size(); ++i) {
        if (!is_hex(comp[i]) || (i > 0 && is_alnum(comp[i - 1]))) continue;
        std::size_t j = i;
        while (j < comp.size() && is_hex(comp[j])) ++j;
        if (j - i == 64 && (j == comp.size() || !is_alnum(comp[j]))) found = lower(comp.substr(i, 64));
        i = j;
      }
    }
    // The innermost (last) id of the first line that has one.
    if (!found.empty()) return found;
  }
  return "";
}

MapsFacts scan_maps(const std::string& maps_text) {
  MapsFacts f;
  std::size_t at = 0;
  while (at < maps_text.size()) {
    auto end = maps_text.find('\n', at);
    if (end == std::string::npos) end = maps_text.size();
    // The path is the first '/' on the line: the fields before it (range,
    // perms, offset, device, inode) hold none.
    const auto slash = maps_text.find('/', at);
    if (slash < end) {
      const std::string path = maps_text.substr(slash, end - slash);
      const auto base = path.substr(path.rfind('/') + 1);
      if (f.python_lib.empty() && starts_with(base, "libpython3")) f.python_lib = path;
      if (f.torch_lib.empty() && starts_with(base, "libtorch") && base.find(".so") != std::string::npos)
        f.torch_lib = path;
      if (starts_with(base, "libcuda.so")) f.cuda = true;
      if (f.xla_lib.empty() && starts_with(base, "_XLAC.") && base.find(".so") != std::string::npos) f.xla_lib = path;
      if (starts_with(base, "libtpu")) f.pjrt_plugin = "TPU";
      if (f.pjrt_plugin.empty() && base.find("pjrt") != std::string::npos &&
          (base.find("gpu") != std::string::npos || base.find("cuda") != std::string::npos))
        f.pjrt_plugin = "CUDA";
    }
    at = end + 1;
  }
  return f;
}

std::string python_version_from_name(const std::string& path) {
  const std::string b = basename_of(path);
  std::size_t at = 0;
  if (starts_with(b, "libpython3."))
    at = 11;
  else if (starts_with(b, "python3."))
    at = 8;
  else
    return "";
  std::size_t j = at;
  while (j < b.size() && std::isdigit(static_cast<unsigned char>(b[j]))) ++j;
  if (j == at || j - at > 3) return "";
  std::string v = "3." + b.substr(at, j - at);
  if (j < b.size() && b[j] == 't') {
    v += "t";
    ++j;
  }
  while (j < b.size() && (b[j] == 'd' || b[j] == 'm')) ++j;  // old ABI flags
  if (j < b.size() && b[j] != '.' && b[j] != '-' && b[j] != '_' && b[j] != ' ') return "";
  return v;
}

std::string version_from_py(const std::string& text) {
  for (const auto& raw : split(text, '\n')) {
    const std::string line = trim(raw);
    if (!starts_with(line, "__version__")) continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    auto q1 = line.find_first_of("'\"", eq);
    if (q1 == std::string::npos) continue;
    auto q2 = line.find(line[q1], q1 + 1);
    if (q2 == std::string::npos || q2 == q1 + 1) continue;
    return line.substr(q1 + 1, q2 - q1 - 1);
  }
  return "";
}

std::string version_from_metadata(const std::string& text) {
  for (const auto& raw : split(text, '\n')) {
    if (trim(raw).empty()) break;  // the headers end at the first blank line
    if (starts_with(raw, "Version:")) return trim(raw.substr(8));
  }
  return "";
}

std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  auto escape = [&out](unsigned char c) { out += "\\x" + hex(c, 2); };
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f)
        escape(c);
      else if (c == '\\')
        out += "\\\\";
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The length and the smallest code point of each lead byte; overlong
    // forms, surrogates and values past U+10FFFF are invalid.
    std::size_t len = 0;
    std::uint32_t cp = 0, min = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4, cp = c & 0x07, min = 0x10000;
    }
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    ok = ok && cp >= min && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) && !(cp >= 0x80 && cp < 0xa0);
    if (!ok) {
      escape(c);
      ++i;
      continue;
    }
    out.append(s, i, len);
    i += len;
  }
  return out;
}

// ---- reading /proc ----

const char* skip_reason(Skip s) {
  switch (s) {
    case Skip::none:
      return "";
    case Skip::gone:
      return "process(es) that exited during the scan";
    case Skip::zombie:
      return "zombie(s) (exited, not yet reaped: nothing left to read)";
    case Skip::kernel_thread:
      return "kernel thread(s)";
    case Skip::unreadable:
      return "process(es) whose /proc/PID/maps or exe could not be read";
    case Skip::self:
      return "ltrace-bpf itself";
  }
  return "";
}

bool root_deleted(pid_t pid) {
  auto root = read_link(pid_file(pid, "root"));
  static const std::string deleted = " (deleted)";
  return root && root->size() > deleted.size() &&
         root->compare(root->size() - deleted.size(), deleted.size(), deleted) == 0;
}

std::vector<pid_t> list_pids() {
  std::vector<pid_t> out;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long v = std::strtol(e->d_name, &end, 10);
      if (*end == '\0' && v > 0) out.push_back(static_cast<pid_t>(v));
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

ProcessProbe probe_process(pid_t pid, const std::string* lightning_known) {
  ProcessProbe p;
  p.pid = pid;
  if (pid == getpid()) {
    p.skip = Skip::self;
    return p;
  }
  auto stat_text = read_small(pid_file(pid, "stat"), 4096);
  auto st = stat_text ? parse_stat(*stat_text) : std::nullopt;
  if (!st) {
    p.skip = Skip::gone;
    return p;
  }
  p.stat = *st;
  if (st->kernel_thread()) {
    p.skip = Skip::kernel_thread;
    return p;
  }
  if (st->zombie()) {
    p.skip = Skip::zombie;
    return p;
  }
  auto exe = read_link(pid_file(pid, "exe"));
  if (!exe) {
    const int err = errno;
    p.skip = err == EACCES || err == EPERM ? Skip::unreadable : Skip::gone;
    return p;
  }
  p.exe = *exe;
  auto maps = read_small(pid_file(pid, "maps"), 64 << 20);
  if (!maps) {
    const int err = errno;
    p.skip = err == EACCES || err == EPERM ? Skip::unreadable : Skip::gone;
    return p;
  }
  if (maps->empty()) {  // an exiting process whose memory is already gone
    p.skip = Skip::gone;
    return p;
  }
  p.maps = scan_maps(*maps);
  p.python = starts_with(basename_of(p.exe), "python") || !p.maps.python_lib.empty();
  if (p.python && !p.maps.torch() && lightning_known) {
    p.lightning_sign = *lightning_known;
  } else if (p.python && !p.maps.torch()) {
    p.lightning_dir = find_lightning(pid, pythonpath_of(pid));
    if (!p.lightning_dir.empty()) {
      p.lightning_sign = "a Lightning package on its PYTHONPATH";
    } else if (lower(python_target(read_cmdline(pid))).find("lightning") != std::string::npos) {
      p.lightning_sign = "its command line";
    }
  }
  return p;
}

std::string torch_version(pid_t pid, const std::string& torch_lib) {
  const std::string site = torch_site(torch_lib);
  if (site.empty()) return "";
  auto text = read_small(root_path(pid, site + "/torch/version.py"), 1 << 16);
  return text ? version_from_py(*text) : "";
}

std::string torch_version(pid_t pid) {
  auto maps = read_small(pid_file(pid, "maps"), 64 << 20);
  return maps ? torch_version(pid, scan_maps(*maps).torch_lib) : "";
}

std::string torch_xla_version(pid_t pid, const std::string& xlac_path) {
  const auto slash = xlac_path.rfind('/');
  if (slash == std::string::npos) return "";
  auto text = read_small(root_path(pid, xlac_path.substr(0, slash) + "/torch_xla/version.py"), 1 << 16);
  return text ? version_from_py(*text) : "";
}

std::string xla_device(const std::string& env, const std::string& plugin) {
  std::string d = !env.empty() ? env.substr(0, 31) : !plugin.empty() ? plugin : "CPU";
  for (auto& c : d)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return d;
}

std::string xla_device(pid_t pid, const MapsFacts& maps) {
  const auto env = read_environ(pid);
  const auto it = env.find("PJRT_DEVICE");
  return xla_device(it == env.end() ? "" : it->second, maps.pjrt_plugin);
}

CensusEntry describe_process(const ProcessProbe& probe) {
  CensusEntry e;
  e.probe = probe;
  const pid_t pid = probe.pid;
  if (auto status = read_small(pid_file(pid, "status"), 1 << 16)) e.nspid = parse_nspid(*status);
  if (auto cg = read_small(pid_file(pid, "cgroup"), 1 << 16)) e.container_id = container_id_from_cgroup(*cg);
  e.hostname = process_hostname(pid);
  e.rank = parse_rank_env(read_environ(pid));
  e.argv = read_cmdline(pid);
  e.python_version = python_version_from_name(probe.maps.python_lib);
  if (e.python_version.empty()) e.python_version = python_version_from_name(probe.exe);
  if (probe.maps.torch()) {
    e.torch_version = torch_version(pid, probe.maps.torch_lib);
    if (e.torch_version.empty()) e.torch_version = "?";
  }
  e.lightning_version = lightning_version(pid, probe);
  if (!probe.maps.xla_lib.empty()) {
    const std::string v = torch_xla_version(pid, probe.maps.xla_lib);
    e.xla = (v.empty() ? "?" : v) + " " + xla_device(pid, probe.maps);
  }
  return e;
}

std::vector<CensusEntry> take_census(CensusSkips* skips) {
  std::vector<CensusEntry> out;
  for (pid_t pid : list_pids()) {
    ProcessProbe p = probe_process(pid);
    if (p.skip != Skip::none) {
      if (skips) ++skips->counts[p.skip];
      continue;
    }
    if (!p.eligible()) {
      if (skips && p.python) skips->python_not_listed.emplace_back(pid, p.stat.comm);
      continue;
    }
    out.push_back(describe_process(p));
  }
  return out;
}

std::vector<pid_t> EligibleWatcher::poll() {
  const std::uint64_t now = now_ns(CLOCK_MONOTONIC);
  std::vector<pid_t> out;
  std::map<pid_t, Seen> next;
  const pid_t self = getpid();
  for (pid_t pid : list_pids()) {
    if (pid == self) continue;
    auto stat_text = read_small(pid_file(pid, "stat"), 4096);
    auto st = stat_text ? parse_stat(*stat_text) : std::nullopt;
    if (!st || st->kernel_thread() || st->zombie()) continue;
    const std::string exe = read_link(pid_file(pid, "exe")).value_or("");
    Seen s;
    bool known = false;
    if (auto it = seen_.find(pid);
        it != seen_.end() && it->second.starttime == st->starttime && it->second.exe == exe) {
      s = it->second;
      known = true;
      if (s.settled || (s.vsize == st->vsize && now < s.next_ns)) {
        next[pid] = s;
        continue;
      }
    } else {
      s.starttime = st->starttime;
      s.exe = exe;
    }
    const ProcessProbe p = probe_process(pid, known ? &s.lightning : nullptr);
    if (p.skip == Skip::gone) continue;
    s.vsize = p.stat.vsize;
    s.lightning = p.lightning_sign;
    if (p.eligible()) {
      out.push_back(pid);
      s.settled = true;
    } else if (p.skip != Skip::none) {
      s.settled = p.skip != Skip::unreadable;
      s.next_ns = now + 5'000'000'000ull;
    } else {
      s.next_ns = now + 5'000'000'000ull;
    }
    next[pid] = s;
  }
  seen_ = std::move(next);
  return out;
}

}  // namespace lt::proc
