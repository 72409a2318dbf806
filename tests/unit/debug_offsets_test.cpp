// The _Py_DebugOffsets formats: each field must be read from the byte
// position that offsetof() gives in that version's header (positions below
// were measured with offsetof() against Debian's libpython3.X-dev headers),
// and the layout built from them must agree with our table.
#include "user/python/debug_offsets.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "user/core/errors.h"

namespace {

struct Raw {
  std::vector<std::uint8_t> bytes;
  Raw(std::size_t size, int minor, bool ft = false) : bytes(size, 0) {
    std::memcpy(bytes.data(), "xdebugpy", 8);
    put(8, (3ull << 24) | (static_cast<std::uint64_t>(minor) << 16));
    put(16, ft ? 1 : 0);
  }
  void put(std::size_t at, std::uint64_t v) { std::memcpy(bytes.data() + at, &v, 8); }
};

TEST(DebugOffsets, FieldsAtTheirHeaderPositions) {
  {
    Raw r(584, 13);
    r.put(152 + 8 * 4, 72);  // thread_state.current_frame
    r.put(536 + 8 * 3, 40);  // unicode_object.asciiobject_size
    r.put(24 + 8 * 2, 632);  // runtime_state.interpreters_head
    auto d = lt::python::parse_debug_offsets(r.bytes.data(), r.bytes.size(), 13);
    EXPECT_EQ(d.get("thread_state.current_frame"), 72u);
    EXPECT_EQ(d.get("unicode_object.asciiobject_size"), 40u);
    EXPECT_EQ(d.get("runtime_state.interpreters_head"), 632u);
    EXPECT_FALSE(d.get("gen_object.gi_iframe").has_value());
  }
  {
    Raw r(760, 14);
    r.put(48 + 8 * 3, 7344);  // interpreter_state.threads_head
    r.put(248 + 8 * 5, 74);   // interpreter_frame.owner
    r.put(312 + 8 * 9, 208);  // code_object.co_code_adaptive
    r.put(664 + 8 * 2, 72);   // gen_object.gi_iframe
    r.put(712 + 8 * 5, 512);  // debugger_support.debugger_script_path_size (the last field)
    auto d = lt::python::parse_debug_offsets(r.bytes.data(), r.bytes.size(), 14);
    EXPECT_EQ(d.get("interpreter_state.threads_head"), 7344u);
    EXPECT_EQ(d.get("interpreter_frame.owner"), 74u);
    EXPECT_EQ(d.get("code_object.co_code_adaptive"), 208u);
    EXPECT_EQ(d.get("gen_object.gi_iframe"), 72u);
    EXPECT_EQ(d.get("debugger_support.debugger_script_path_size"), 512u);
  }
  {
    Raw r(888, 15);
    r.put(176 + 8 * 9, 184);  // thread_state.native_thread_id
    r.put(312 + 8 * 3, 56);   // interpreter_frame.instr_ptr
    r.put(712 + 8 * 4, 56);   // unicode_object.compactunicodeobject_size
    r.put(792 + 8 * 2, 72);   // gen_object.gi_iframe
    auto d = lt::python::parse_debug_offsets(r.bytes.data(), r.bytes.size(), 15);
    EXPECT_EQ(d.get("thread_state.native_thread_id"), 184u);
    EXPECT_EQ(d.get("interpreter_frame.instr_ptr"), 56u);
    EXPECT_EQ(d.get("unicode_object.compactunicodeobject_size"), 56u);
    EXPECT_EQ(d.get("gen_object.gi_iframe"), 72u);
  }
}

TEST(DebugOffsets, RefusesWhatItCannotRead) {
  auto code = [](const Raw& r, int minor) {
    try {
      lt::python::parse_debug_offsets(r.bytes.data(), r.bytes.size(), minor);
    } catch (const lt::Error& e) {
      return e.code();
    }
    return lt::ExitCode::ok;
  };
  EXPECT_EQ(code(Raw(760, 14), 14), lt::ExitCode::ok);
  EXPECT_EQ(code(Raw(760, 15), 14), lt::ExitCode::unsupported);  // version disagrees with the binary
  EXPECT_EQ(code(Raw(584, 14), 14), lt::ExitCode::unsupported);  // truncated
  EXPECT_EQ(code(Raw(900, 16), 16), lt::ExitCode::unsupported);  // a format we do not know
  Raw bad(584, 13);
  bad.bytes[0] = 'X';
  EXPECT_EQ(code(bad, 13), lt::ExitCode::unsupported);
  EXPECT_FALSE(lt::python::debug_offsets_known(16));
}

// A layout built from what the interpreter publishes equals our table for
// the builds we know, and a differing value is refused, naming the field.
TEST(DebugOffsets, AppliedLayoutIsCrossChecked) {
  for (int minor : {13, 14, 15}) {
    auto table = *lt::python::layout_for(minor);
    std::size_t size = minor == 13 ? 584 : minor == 14 ? 760 : 888;
    Raw r(size, minor);
    auto d = lt::python::parse_debug_offsets(r.bytes.data(), r.bytes.size(), minor);
    // Publish the table's own values: the result must be the table.
    d.fields.clear();
    d.fields["thread_state.current_frame"] = table.tstate_frame;
    d.fields["interpreter_frame.owner"] = table.frame_owner;
    d.fields["code_object.co_code_adaptive"] = table.bpf.code_adaptive;
    auto l = table;
    lt::python::apply_debug_offsets(d, l);
    EXPECT_EQ(l.bpf.frame_owner, table.bpf.frame_owner);
    EXPECT_EQ(l.bpf.tstate_frame, table.tstate_frame);
    d.fields["interpreter_frame.owner"] = table.frame_owner + 2;
    try {
      lt::python::apply_debug_offsets(d, l);
      ADD_FAILURE() << "a differing owner offset was accepted for 3." << minor;
    } catch (const lt::Error& e) {
      EXPECT_EQ(e.code(), lt::ExitCode::unsupported);
      EXPECT_NE(std::string(e.what()).find("interpreter_frame.owner"), std::string::npos);
    }
  }
}

// The collector's flag (sampled GC time): the interpreter's gc section
// plus gc.collecting, taken where the table has none (3.14/3.15), checked
// where it has one (3.13: gdb's offsetof() on pyenv's libpython3.13).
TEST(DebugOffsets, TheCollectorsFlagIsPublishedOrCrossChecked) {
  for (int minor : {13, 14, 15}) {
    auto table = *lt::python::layout_for(minor);
    lt::python::DebugOffsets d;
    d.minor = minor;
    d.fields["interpreter_state.gc"] = 7400;
    d.fields["gc.collecting"] = 200;
    d.fields["thread_state.interp"] = 16;
    auto l = table;
    lt::python::apply_debug_offsets(d, l);
    EXPECT_EQ(l.interp_gc_collecting, 7600u) << "3." << minor;
    EXPECT_EQ(l.tstate_interp, 16u);
    if (minor == 13) {
      d.fields["gc.collecting"] = 208;
      auto again = table;
      EXPECT_THROW(lt::python::apply_debug_offsets(d, again), lt::Error);
    } else {
      EXPECT_EQ(table.interp_gc_collecting, 0u) << "3." << minor << " has a table value: test it as 3.13's";
    }
  }
}

}  // namespace
