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
// The thread main_thread_at() speaks of (the main thread, else the first
// with frames); null for none.
const python::ThreadDump* main_thread_of(const python::ProcessDump& d);
// A file of the Python's standard library or of an installed package
// (torch, Lightning), not the job's own code.
bool installed_code(const std::string& file);
// A stall's top cause, continued: where the main thread waits in its
// DataLoader (torch's dataloader.py), the descendant (`kids`) whose main
// thread is in the job's own code, "; its DataLoader waits for process
// 31884: main thread ... at DS.__getitem__ (job.py:41)"; "" otherwise.
std::string loader_wait(const python::ProcessDump& d, const std::vector<python::ProcessDump>& kids);

}  // namespace lt
