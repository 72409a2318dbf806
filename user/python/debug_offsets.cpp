#include "user/python/debug_offsets.h"

#include <array>
#include <cstring>
#include <functional>
#include <sstream>

#include "user/core/errors.h"
#include "user/proc/procfs.h"

namespace lt::python {

namespace {

// The struct after its header {char cookie[8]; u64 version; u64
// free_threaded;}, section by section, from CPython's
// Include/internal/pycore_debug_offsets.h of each version.  Every field is a
// uint64_t, so a field's place follows from its position in this list.
struct Format {
  int minor;
  std::size_t size;  // sizeof(_Py_DebugOffsets), checked against the list
  const char* sections;
};
// clang-format off
constexpr std::array<Format, 3> kFormats{{
  {13, 584,
   "runtime_state:size,finalizing,interpreters_head|"
   "interpreter_state:size,id,next,threads_head,gc,imports_modules,sysdict,builtins,ceval_gil,gil_runtime_state,"
     "gil_runtime_state_enabled,gil_runtime_state_locked,gil_runtime_state_holder|"
   "thread_state:size,prev,next,interp,current_frame,thread_id,native_thread_id,datastack_chunk,status|"
   "interpreter_frame:size,previous,executable,instr_ptr,localsplus,owner|"
   "code_object:size,filename,name,qualname,linetable,firstlineno,argcount,localsplusnames,localspluskinds,"
     "co_code_adaptive|"
   "pyobject:size,ob_type|type_object:size,tp_name,tp_repr,tp_flags|tuple_object:size,ob_item,ob_size|"
   "list_object:size,ob_item,ob_size|dict_object:size,ma_keys,ma_values|float_object:size,ob_fval|"
   "long_object:size,lv_tag,ob_digit|bytes_object:size,ob_size,ob_sval|"
   "unicode_object:size,state,length,asciiobject_size|gc:size,collecting"},
  {14, 760,
   "runtime_state:size,finalizing,interpreters_head|"
   "interpreter_state:size,id,next,threads_head,threads_main,gc,imports_modules,sysdict,builtins,ceval_gil,"
     "gil_runtime_state,gil_runtime_state_enabled,gil_runtime_state_locked,gil_runtime_state_holder,"
     "code_object_generation,tlbc_generation|"
   "thread_state:size,prev,next,interp,current_frame,thread_id,native_thread_id,datastack_chunk,status|"
   "interpreter_frame:size,previous,executable,instr_ptr,localsplus,owner,stackpointer,tlbc_index|"
   "code_object:size,filename,name,qualname,linetable,firstlineno,argcount,localsplusnames,localspluskinds,"
     "co_code_adaptive,co_tlbc|"
   "pyobject:size,ob_type|type_object:size,tp_name,tp_repr,tp_flags|tuple_object:size,ob_item,ob_size|"
   "list_object:size,ob_item,ob_size|set_object:size,used,table,mask|dict_object:size,ma_keys,ma_values|"
   "float_object:size,ob_fval|long_object:size,lv_tag,ob_digit|bytes_object:size,ob_size,ob_sval|"
   "unicode_object:size,state,length,asciiobject_size|gc:size,collecting|"
   "gen_object:size,gi_name,gi_iframe,gi_frame_state|llist_node:next,prev|"
   "debugger_support:eval_breaker,remote_debugger_support,remote_debugging_enabled,debugger_pending_call,"
     "debugger_script_path,debugger_script_path_size"},
  {15, 888,
   "runtime_state:size,finalizing,interpreters_head|"
   "interpreter_state:size,id,next,threads_head,threads_main,gc,imports_modules,sysdict,builtins,ceval_gil,"
     "gil_runtime_state,gil_runtime_state_enabled,gil_runtime_state_locked,gil_runtime_state_holder,"
     "code_object_generation,tlbc_generation|"
   "thread_state:size,prev,next,interp,current_frame,base_frame,last_profiled_frame,last_profiled_frame_seq,"
     "thread_id,native_thread_id,datastack_chunk,status,holds_gil,gil_requested,current_exception,exc_state|"
   "err_stackitem:exc_value|"
   "interpreter_frame:size,previous,executable,instr_ptr,localsplus,owner,stackpointer,tlbc_index|"
   "code_object:size,filename,name,qualname,linetable,firstlineno,argcount,localsplusnames,localspluskinds,"
     "co_code_adaptive,co_tlbc|"
   "pyobject:size,ob_type|type_object:size,tp_name,tp_repr,tp_flags,tp_basicsize,tp_dictoffset|"
   "heap_type_object:size,ht_cached_keys|tuple_object:size,ob_item,ob_size|list_object:size,ob_item,ob_size|"
   "set_object:size,used,table,mask|dict_object:size,ma_keys,ma_values|float_object:size,ob_fval|"
   "long_object:size,lv_tag,ob_digit|bytes_object:size,ob_size,ob_sval|"
   "unicode_object:size,state,length,asciiobject_size,compactunicodeobject_size|"
   "gc:size,collecting,frame,generation_stats_size,generation_stats|"
   "gen_object:size,gi_name,gi_iframe,gi_frame_state|llist_node:next,prev|"
   "debugger_support:eval_breaker,remote_debugger_support,remote_debugging_enabled,debugger_pending_call,"
     "debugger_script_path,debugger_script_path_size"},
}};
// clang-format on
constexpr std::size_t kHeader = 24;  // cookie, version, free_threaded

const Format* format_for(int minor) {
  for (const auto& f : kFormats)
    if (f.minor == minor) return &f;
  return nullptr;
}

// "sec:a,b|sec2:c" -> {"sec.a", "sec.b", "sec2.c"} in order.
std::vector<std::string> field_names(const char* spec) {
  std::vector<std::string> out;
  std::stringstream sections(spec);
  std::string section;
  while (std::getline(sections, section, '|')) {
    auto colon = section.find(':');
    std::stringstream fields(section.substr(colon + 1));
    std::string f;
    while (std::getline(fields, f, ',')) out.push_back(section.substr(0, colon) + "." + f);
  }
  return out;
}

Error unsupported(const std::string& what) {
  return Error(ExitCode::unsupported, what);
}

}  // namespace

bool debug_offsets_known(int minor) {
  return format_for(minor) != nullptr;
}

DebugOffsets parse_debug_offsets(const std::uint8_t* raw, std::size_t len, int minor) {
  const Format* fmt = format_for(minor);
  if (!fmt) throw unsupported("the _Py_DebugOffsets of CPython 3." + std::to_string(minor) + " are not known");
  const auto names = field_names(fmt->sections);
  if (kHeader + 8 * names.size() != fmt->size)
    throw Error(ExitCode::internal, "_Py_DebugOffsets format for 3." + std::to_string(minor) + " is inconsistent");
  if (len < fmt->size) throw unsupported("_Py_DebugOffsets is truncated");
  if (std::memcmp(raw, "xdebugpy", 8) != 0)
    throw unsupported("_PyRuntime does not start with the _Py_DebugOffsets cookie");
  auto u64_at = [&](std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, raw + at, 8);
    return v;
  };
  DebugOffsets d;
  const std::uint64_t version = u64_at(8);
  d.major = static_cast<int>((version >> 24) & 0xff);
  d.minor = static_cast<int>((version >> 16) & 0xff);
  if (d.major != 3 || d.minor != minor)
    throw unsupported("_Py_DebugOffsets says CPython " + std::to_string(d.major) + "." + std::to_string(d.minor) +
                      ", the binary says 3." + std::to_string(minor));
  d.free_threaded = u64_at(16) != 0;
  for (std::size_t i = 0; i < names.size(); ++i) d.fields[names[i]] = u64_at(kHeader + 8 * i);
  return d;
}

DebugOffsets read_debug_offsets(pid_t pid, std::uint64_t runtime_addr, int minor) {
  const Format* fmt = format_for(minor);
  if (!fmt) throw unsupported("the _Py_DebugOffsets of CPython 3." + std::to_string(minor) + " are not known");
  std::vector<std::uint8_t> raw(fmt->size);
  if (!proc::read_memory(pid, runtime_addr, raw.data(), raw.size()))
    throw proc::unreadable_memory(pid, runtime_addr, raw.size());
  return parse_debug_offsets(raw.data(), raw.size(), minor);
}

void apply_debug_offsets(const DebugOffsets& d, Layout& l) {
  auto& o = l.bpf;
  auto u16_field = [](lt::u16& f) { return [&f](std::uint64_t v) { f = static_cast<lt::u16>(v); }; };
  auto uint_field = [](unsigned& f) { return [&f](std::uint64_t v) { f = static_cast<unsigned>(v); }; };
  struct Use {
    const char* name;
    unsigned expected;
    std::function<void(std::uint64_t)> set;
  };
  const Use uses[] = {
      {"runtime_state.interpreters_head", l.runtime_interp_head, uint_field(l.runtime_interp_head)},
      {"interpreter_state.threads_head", l.interp_threads_head, uint_field(l.interp_threads_head)},
      {"thread_state.next", l.tstate_next, uint_field(l.tstate_next)},
      {"thread_state.current_frame", l.tstate_frame,
       [&](std::uint64_t v) { l.tstate_frame = static_cast<unsigned>(v), o.tstate_frame = static_cast<lt::u16>(v); }},
      {"thread_state.thread_id", l.tstate_thread_id, uint_field(l.tstate_thread_id)},
      {"thread_state.native_thread_id", l.tstate_native_thread_id, uint_field(l.tstate_native_thread_id)},
      {"interpreter_frame.previous", l.frame_previous,
       [&](std::uint64_t v) {
         l.frame_previous = static_cast<unsigned>(v), o.frame_previous = static_cast<lt::u16>(v);
       }},
      {"interpreter_frame.executable", o.frame_code, u16_field(o.frame_code)},
      {"interpreter_frame.instr_ptr", o.frame_lasti, u16_field(o.frame_lasti)},
      {"interpreter_frame.localsplus", o.frame_localsplus, u16_field(o.frame_localsplus)},
      {"interpreter_frame.owner", l.frame_owner,
       [&](std::uint64_t v) { l.frame_owner = static_cast<unsigned>(v), o.frame_owner = static_cast<lt::u16>(v); }},
      {"code_object.filename", o.code_filename, u16_field(o.code_filename)},
      {"code_object.name", o.code_name, u16_field(o.code_name)},
      {"code_object.qualname", l.code_qualname, uint_field(l.code_qualname)},
      {"code_object.linetable", l.code_linetable, uint_field(l.code_linetable)},
      {"code_object.firstlineno", o.code_firstlineno, u16_field(o.code_firstlineno)},
      {"code_object.argcount", o.code_argcount, u16_field(o.code_argcount)},
      {"code_object.localsplusnames", l.code_varnames, uint_field(l.code_varnames)},
      {"code_object.co_code_adaptive", o.code_adaptive, u16_field(o.code_adaptive)},
      {"unicode_object.asciiobject_size", o.str_ascii_data, u16_field(o.str_ascii_data)},
      {"unicode_object.compactunicodeobject_size", o.str_compact_data, u16_field(o.str_compact_data)},
      {"gen_object.gi_iframe", o.gen_frame, u16_field(o.gen_frame)},
      {"type_object.tp_name", l.type_tp_name, uint_field(l.type_tp_name)},
      // BPF reads ob_type at 8 (a GIL build's PyObject header).
      {"pyobject.ob_type", 8, [](std::uint64_t) {}},
  };
  for (const auto& u : uses) {
    auto v = d.get(u.name);
    if (!v) continue;  // not published by this version: the table's value stands
    if (*v != u.expected)
      throw unsupported("this CPython 3." + std::to_string(d.minor) + " build has an unexpected layout (" + u.name +
                        " = " + std::to_string(*v) + ", expected " + std::to_string(u.expected) + ")");
    u.set(*v);
  }
  // The GIL holder matters only to `dump`: what is published wins, with no
  // cross-check (3.15 has no table value for it).
  if (auto v = d.get("interpreter_state.gil_runtime_state_holder")) l.interp_gil_holder = static_cast<unsigned>(*v);
  if (auto v = d.get("interpreter_state.gil_runtime_state_locked")) l.interp_gil_locked = static_cast<unsigned>(*v);
  // The collector's flag and PyThreadState.interp matter only to sampled GC
  // time: what is published wins, cross-checked where the table has a value
  // (3.13; 3.14/3.15 have none).
  auto published = [&](const char* name, std::optional<std::uint64_t> v, unsigned& field) {
    if (!v) return;
    if (field && *v != field)
      throw unsupported("this CPython 3." + std::to_string(d.minor) + " build has an unexpected layout (" + name +
                        " = " + std::to_string(*v) + ", expected " + std::to_string(field) + ")");
    field = static_cast<unsigned>(*v);
  };
  auto gc = d.get("interpreter_state.gc"), collecting = d.get("gc.collecting");
  published("interpreter_state.gc + gc.collecting",
            gc && collecting ? std::optional<std::uint64_t>(*gc + *collecting) : std::nullopt, l.interp_gc_collecting);
  published("thread_state.interp", d.get("thread_state.interp"), l.tstate_interp);
  // sys.modules matters only to reading Dynamo's state: the same rule.
  published("interpreter_state.imports_modules", d.get("interpreter_state.imports_modules"), l.interp_modules);
}

}  // namespace lt::python
