// Writes a small valid trace file to seed the fuzzer's corpus.
#include <cstdio>
#include <cstring>

#include "user/tracefile/trace_writer.h"

using namespace lt;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  lt::tracefile::TraceWriter w(argv[1]);
  for (int i = 0; i < 8; ++i) {
    lt_action_event e{};
    e.hdr = {static_cast<lt::u16>(i % 2 ? LT_EV_ACTION_END : LT_EV_ACTION_BEGIN), sizeof e, 1, 1, 0,
             static_cast<lt::u64>(i)};
    e.key = static_cast<lt::u64>(i / 2);
    std::snprintf(e.name, sizeof e.name, "a%d", i / 2);
    w.append(&e, sizeof e);
    if (i == 3) w.flush();
  }
  w.close();
  return 0;
}
