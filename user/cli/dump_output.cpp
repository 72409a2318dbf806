#include "user/cli/dump_output.h"

#include <algorithm>

#include "user/proc/syscall_names.h"
#include "user/python/line_table.h"
#include "user/text/json_escape.h"
#include "user/text/numbers.h"
#include "user/text/utf8_text.h"

namespace lt {

namespace {

std::string hex_addr(std::uint64_t v) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), hex[v & 15]);
    v >>= 4;
  } while (v);
  return "0x" + s;
}

}  // namespace

// A name as one line of valid UTF-8: control characters (a newline in a
// file name) as \xNN, so one frame stays one line.
std::string one_line(const std::string& bytes) {
  std::string out;
  for (char c : utf8_text(bytes)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

// "sleeping in futex", "running", "disk sleep in read".
std::string state_of(const python::ThreadDump& t) {
  if (t.gone) return "exited while read";
  std::string s = t.status.state_words();
  if (t.status.syscall >= 0 && t.status.state != 'R') s += " in " + proc::syscall_name(t.status.syscall);
  return s;
}

std::string frame_text(const python::PyFrameInfo& f) {
  if (!f.readable) return "<unreadable code object>";
  std::string line = f.line == python::kNoLine ? "?" : std::to_string(f.line);
  return one_line(f.function) + " (" + one_line(f.file) + ":" + line + ")";
}

std::string dump_text(const python::ProcessDump& d) {
  std::string out = "Process " + std::to_string(d.pid) + ":";
  for (const auto& a : d.cmdline) out += " " + one_line(a);
  if (d.cmdline.empty()) out += " [" + one_line(d.comm) + "]";
  out += "\nPython " + d.python_version + " (" + one_line(d.python_binary) + "); ";
  if (!d.gil_known)
    out += "GIL holder not known for this version";
  else if (d.gil_tid)
    out += "GIL held by thread " + std::to_string(d.gil_tid);
  else
    out += "GIL not held";
  out += "; " + std::to_string(d.threads.size()) + " threads, read in " + fixed(d.read_ms, 1) + " ms\n";
  for (const auto& t : d.threads) {
    out += "\nThread " + (t.status.tid ? std::to_string(t.status.tid) : std::string("?"));
    if (!t.status.name.empty()) out += " \"" + one_line(t.status.name) + "\"";
    if (t.holds_gil) out += " (holds the GIL)";
    if (!t.python) out += " (no Python)";
    out += ": " + state_of(t);
    if (t.blocked_at_least_s > 0) out += " (for at least " + fixed(t.blocked_at_least_s, 1) + " s)";
    if (t.leaf) out += ", at " + one_line(t.leaf->function) + " (" + one_line(t.leaf->dso) + ")";
    out += "\n";
    for (const auto& f : t.frames) out += "    " + frame_text(f) + "\n";
    if (t.truncated) out += "    ... (deeper than " + std::to_string(python::kMaxFrames) + " frames)\n";
    if (t.torn) out += "    <the stack changed while it was read: the frames above may be incomplete>\n";
  }
  return out;
}

std::string dump_json(const std::vector<python::ProcessDump>& dumps) {
  std::string out = "{\"processes\": [";
  for (std::size_t i = 0; i < dumps.size(); ++i) out += (i ? ",\n" : "\n") + dump_process_json(dumps[i]);
  out += "\n]}\n";
  return out;
}

std::string dump_process_json(const python::ProcessDump& d) {
  std::string out;
  out += "{\"pid\": " + std::to_string(d.pid) + ", \"comm\": " + json_string(d.comm) + ", \"cmdline\": [";
  for (std::size_t i = 0; i < d.cmdline.size(); ++i) out += (i ? ", " : "") + json_string(d.cmdline[i]);
  out += "], \"python\": " + json_string(d.python_version) + ", \"python_binary\": " + json_string(d.python_binary);
  out += ", \"gil_known\": " + std::string(d.gil_known ? "true" : "false");
  out += ", \"gil_tid\": " + (d.gil_tid ? std::to_string(d.gil_tid) : std::string("null"));
  out += ", \"read_ms\": " + fixed(d.read_ms, 3) + ", \"threads\": [";
  bool first_t = true;
  for (const auto& t : d.threads) {
    out += first_t ? "\n  " : ",\n  ";
    first_t = false;
    out += "{\"tid\": " + (t.status.tid ? std::to_string(t.status.tid) : std::string("null"));
    out += ", \"name\": " + json_string(t.status.name);
    out += ", \"state\": " + json_string(t.gone ? "exited" : t.status.state_words());
    out += ", \"syscall\": " +
           (t.status.syscall >= 0 && !t.gone ? json_string(proc::syscall_name(t.status.syscall)) : std::string("null"));
    out += ", \"python\": " + std::string(t.python ? "true" : "false");
    out += ", \"holds_gil\": " + std::string(t.holds_gil ? "true" : "false");
    out += ", \"native_leaf\": ";
    if (t.leaf)
      out += "{\"function\": " + json_string(t.leaf->function) + ", \"dso\": " + json_string(t.leaf->dso) +
             ", \"ip\": " + json_string(hex_addr(t.status.pc)) + "}";
    else
      out += "null";
    out += ", \"truncated\": " + std::string(t.truncated ? "true" : "false");
    out += ", \"torn\": " + std::string(t.torn ? "true" : "false");
    out += ", \"blocked_at_least_s\": " +
           (t.blocked_at_least_s > 0 ? fixed(t.blocked_at_least_s, 3) : std::string("null"));
    out += ", \"frames\": [";
    for (std::size_t i = 0; i < t.frames.size(); ++i) {
      const auto& f = t.frames[i];
      out += i ? ", " : "";
      if (!f.readable)
        out += "null";
      else
        out += "{\"function\": " + json_string(f.function) + ", \"file\": " + json_string(f.file) +
               ", \"line\": " + (f.line == python::kNoLine ? std::string("null") : std::to_string(f.line)) + "}";
    }
    out += "]}";
  }
  out += "]}";
  return out;
}

bool installed_code(const std::string& file) {
  return file.find("/lib/python") != std::string::npos || file.find("-packages/") != std::string::npos ||
         file.starts_with("<frozen ");
}

const python::ThreadDump* main_thread_of(const python::ProcessDump& d) {
  for (const auto& t : d.threads)
    if (t.status.tid == d.pid && !t.frames.empty()) return &t;
  for (const auto& t : d.threads)
    if (!t.frames.empty()) return &t;
  return nullptr;
}

std::string main_thread_at(const python::ProcessDump& d) {
  const python::ThreadDump* main = main_thread_of(d);
  if (!main) return "";
  const auto f = std::find_if(main->frames.begin(), main->frames.end(), [](const auto& x) { return x.readable; });
  std::string s =
      std::string(main->status.tid == d.pid ? "main thread" : "thread " + std::to_string(main->status.tid)) + " " +
      state_of(*main);
  if (f == main->frames.end()) return s;
  s += " at " + frame_text(*f);
  // Where the job's own code is: the innermost frame outside the Python's
  // standard library and installed packages (torch, Lightning), when the
  // innermost is one of those (an audit's hang on threading.Event().wait()
  // named Condition.wait in threading.py, the training_step line only in
  // threads.txt).
  if (!installed_code(f->file)) return s;
  const auto own = std::find_if(std::next(f), main->frames.end(), [&](const auto& x) {
    return x.readable && !x.file.empty() && !installed_code(x.file);
  });
  if (own != main->frames.end()) s += ", from " + frame_text(*own);
  return s;
}

// Where the main thread waits in its DataLoader (torch's dataloader.py:
// the next batch from its workers), the descendants whose main thread is
// in the job's own code (a worker's __getitem__ that hangs; an idle worker
// waits in torch's worker loop): "; its DataLoader waits for process 31884:
// main thread sleeping in ... at DS.__getitem__ (job.py:41)". An audit's
// hung __getitem__ was named only in threads.txt, the summary saying the
// main thread polled in selectors.py from the trainer.fit line.
std::string loader_wait(const python::ProcessDump& d, const std::vector<python::ProcessDump>& kids) {
  const python::ThreadDump* main = main_thread_of(d);
  if (!main || std::none_of(main->frames.begin(), main->frames.end(),
                            [](const auto& f) { return f.file.ends_with("/torch/utils/data/dataloader.py"); }))
    return "";
  std::string named;
  std::size_t in_own_code = 0;
  for (const auto& k : kids) {
    const python::ThreadDump* km = main_thread_of(k);
    if (!km || std::none_of(km->frames.begin(), km->frames.end(),
                            [](const auto& f) { return f.readable && !f.file.empty() && !installed_code(f.file); }))
      continue;
    if (!in_own_code++) named = "process " + std::to_string(k.pid) + ": " + main_thread_at(k);
  }
  if (!in_own_code) return "";
  return "; its DataLoader waits for " + named +
         (in_own_code > 1 ? " (and " + std::to_string(in_own_code - 1) + " more in the job's code)" : "");
}

}  // namespace lt
