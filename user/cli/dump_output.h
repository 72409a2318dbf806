// `dump` output: py-spy dump's layout as text (one block per thread,
// innermost frame first, "function (file:line)"), or one JSON document.
// Both are valid UTF-8 whatever the target holds (user/text/utf8_text.h:
// text as Python's backslashreplace, JSON strings that give back the str).
#pragma once
#include <string>
#include <vector>

#include "user/python/process_dump.h"

namespace lt {

std::string dump_text(const python::ProcessDump& d);
// {"processes": [...]}: docs/design-dump.md lists the fields.
std::string dump_json(const std::vector<python::ProcessDump>& dumps);
// One element of "processes" (no trailing newline).
std::string dump_process_json(const python::ProcessDump& d);

// The pieces the cluster dump's verdict shares: a name as one line of
// valid UTF-8 (control characters as \xNN); "function (file:line)".
std::string one_line(const std::string& bytes);
std::string frame_text(const python::PyFrameInfo& f);
// "sleeping in futex", "running", "exited while read".
std::string state_of(const python::ThreadDump& t);
// Where a process's main thread is, in one line (a stall's top cause):
// "main thread sleeping in clock_nanosleep at stalled_here (job.py:26)".
// The main thread is the one whose tid is the pid, else the first with
// Python frames; "" when no thread has any.
std::string main_thread_at(const python::ProcessDump& d);

}  // namespace lt
