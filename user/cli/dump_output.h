// `dump` output: py-spy dump's layout as text (one block per thread,
// innermost frame first, "function (file:line)"), or one JSON document.
// Both are valid UTF-8 whatever the target holds (reports/format/utf8_text.h:
// text as Python's backslashreplace, JSON strings that give back the str).
#pragma once
#include <string>
#include <vector>

#include "user/python/process_dump.h"

namespace lt {

std::string dump_text(const python::ProcessDump& d);
// {"processes": [...]}: docs/design-dump.md lists the fields.
std::string dump_json(const std::vector<python::ProcessDump>& dumps);

}  // namespace lt
