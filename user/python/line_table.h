// Which source line a CPython frame is executing, from the code object's raw
// line table and the instruction position the BPF sampler read from the frame.
// The tables come out of a live process, so every byte is untrusted: the
// decoder never reads outside `table`, runs in time linear in its size, and
// turns garbage into some line number rather than an error.
#pragma once
#include <cstdint>
#include <span>

namespace lt::python {

// What line_for() returns when CPython itself has no line for the instruction
// (3.10 line delta -128, 3.11+ entry kind 15: compiler-generated code such as
// exception-table cleanup).  CPython reports None / -1 there; 0 is never a
// real line, so it doubles as "unknown" for a report.
inline constexpr int kNoLine = 0;

// Line being executed by a frame of CPython 3.<minor>.
//
// table: the raw bytes of co_lnotab (3.8/3.9) or co_linetable (3.10+).
// index: the position as the BPF sampler reports it:
//   3.8/3.9  f_lasti, a BYTE offset into co_code (-1 = not started)
//   3.10     f_lasti, an INSTRUCTION index in 2-byte code units (-1 = not started)
//   3.11+    (instruction pointer - start of co_code_adaptive) / 2, in code
//            units.  3.11/3.12 report prev_instr, which is -1 before the first
//            instruction and may point at an inline CACHE unit (those map to
//            the line of the instruction that owns them); 3.13+ report instr_ptr.
//
// Returns first_line for a negative index (frame not started), for a position
// the table does not cover (3.10+; garbage or a stale read), and for a minor
// version outside 3.8..3.15 whose format we have not verified (3.14/3.15 keep
// 3.11's location table: checked on Debian sid's builds by test_dump.py).  Returns kNoLine
// where the table says the instruction has no line.  On 3.8/3.9 a position past
// the end gets the table's last line, as CPython's PyCode_Addr2Line does.
int line_for(int minor, int first_line, std::span<const std::uint8_t> table, int index);

}  // namespace lt::python
