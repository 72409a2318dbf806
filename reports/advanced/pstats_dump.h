// AdvancedProfiler's dump_stats from sampled stacks: the file cProfile's
// Profile.dump_stats writes (what pstats.Stats(path) and snakeviz load),
// made from one action's on-CPU samples (cut at the action's opening frame,
// as the Advanced tables are).  The file is Python's marshal of
//   {(file, line, funcname): (cc, nc, tt, ct, {caller: (nc, cc, tt, ct)})}
// (cProfile's snapshot_stats order: callers' tuples start with nc).
//
// What the numbers are (docs/design-stacks.md, "The .prof files"):
//   tt, ct   estimates: samples x period, CPU time (cProfile's are wall time)
//   nc       a lower bound on calls: the distinct call paths (from the
//            action's opening frame, callers' lines included) that samples
//            caught the function in; each needs a call of its own
//   cc       the same, without the paths where the function is already on
//            the stack (pstats' primitive calls)
#pragma once
#include <compare>
#include <cstdint>
#include <map>
#include <string>

#include "user/model/stack_profile.h"

namespace lt {

struct PstatsKey {
  std::string file;  // co_filename; "~" for pseudo-frames, as cProfile names builtins
  int line = 0;      // co_firstlineno (0: native)
  std::string name;  // co_qualname (3.11+) / co_name, or the native symbol
  auto operator<=>(const PstatsKey&) const = default;
};

struct PstatsCounts {
  std::uint64_t cc = 0, nc = 0;  // primitive calls, calls
  double tt = 0, ct = 0;         // seconds: own, cumulative
};

struct PstatsEntry {
  PstatsCounts own;
  std::map<PstatsKey, PstatsCounts> callers;  // the frame directly above it
};

using PstatsStats = std::map<PstatsKey, PstatsEntry>;

// The one row of a profile no sample caught (0 calls, 0 s): pstats cannot
// load an empty dump.
inline constexpr const char* kNoSamplesRow = "[no samples in this action]";

// The stats of one on-CPU profile (unit samples; period_ns seconds per
// sample).  Other units (off-CPU nanoseconds) are taken as nanoseconds.
PstatsStats pstats_from_stacks(const StackProfile& p);

// Python's marshal (version 4 types, no references) of the stats dict:
// marshal.loads(bytes) gives the dict pstats reads.  Names are written as
// valid UTF-8 (utf8_text: bytes that are not become \xNN).
std::string marshal_pstats(const PstatsStats& stats);

// The caveat written beside the files (pstats has no header field for it):
// DIR/README.ltrace-bpf.txt.
inline constexpr const char* kPstatsDumpReadmeName = "README.ltrace-bpf.txt";
std::string pstats_dump_readme(std::uint64_t period_ns, unsigned rate_hz);

// The marshal encoder's pieces, exposed for its tests.
namespace marshal {
void put_int(std::string& out, std::int64_t v);           // 'i' (int32) or 'l' (15-bit digits)
void put_float(std::string& out, double v);               // 'g': IEEE 754 binary64, little-endian
void put_str(std::string& out, const std::string& utf8);  // 'u': length-prefixed UTF-8
}  // namespace marshal

}  // namespace lt
