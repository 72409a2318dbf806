#include "user/torch/comm_sites.h"

#include <algorithm>
#include <cstring>

#include "bpf/events.h"
#include "user/core/errors.h"
#include "user/proc/elf_image.h"

namespace lt {

namespace {

struct Method {
  std::string_view name;  // c10d::ProcessGroupGloo::<name>, c10d::ProcessGroupNCCL::<name>
  std::uint32_t kind, reg, form;
};

// rdx = 2, rcx = 3: the first and second arguments after the hidden return
// pointer (rdi) and `this` (rsi).  The tensor is this rank's share: the
// buffer of an in-place call, the input of a gather-like call, the output
// of a scatter-like call.
constexpr Method kMethods[] = {
    {"allreduce", LT_COMM_ALLREDUCE, 2, LT_COMM_FORM_VECTOR},
    {"allreduce_coalesced", LT_COMM_ALLREDUCE_COALESCED, 2, LT_COMM_FORM_VECTOR},
    {"broadcast", LT_COMM_BROADCAST, 2, LT_COMM_FORM_VECTOR},
    {"reduce", LT_COMM_REDUCE, 2, LT_COMM_FORM_VECTOR},
    {"allgather", LT_COMM_ALLGATHER, 3, LT_COMM_FORM_VECTOR},  // (outputs[][], inputs[])
    {"allgather_coalesced", LT_COMM_ALLGATHER_COALESCED, 3, LT_COMM_FORM_VECTOR},
    {"_allgather_base", LT_COMM_ALLGATHER_INTO_TENSOR, 3, LT_COMM_FORM_TENSOR},    // torch < 2.10
    {"all_gather_single", LT_COMM_ALLGATHER_INTO_TENSOR, 3, LT_COMM_FORM_TENSOR},  // (output, input)
    {"gather", LT_COMM_GATHER, 3, LT_COMM_FORM_VECTOR},
    {"scatter", LT_COMM_SCATTER, 2, LT_COMM_FORM_VECTOR},                // (outputs[], inputs[][])
    {"reduce_scatter", LT_COMM_REDUCE_SCATTER, 2, LT_COMM_FORM_VECTOR},  // (outputs[], inputs[][])
    {"reduce_scatter_single", LT_COMM_REDUCE_SCATTER_TENSOR, 2, LT_COMM_FORM_TENSOR},
    {"alltoall", LT_COMM_ALLTOALL, 3, LT_COMM_FORM_VECTOR},
    {"alltoall_base", LT_COMM_ALLTOALL_SINGLE, 3, LT_COMM_FORM_TENSOR},  // torch < 2.10
    {"all_to_all_single", LT_COMM_ALLTOALL_SINGLE, 3, LT_COMM_FORM_TENSOR},
    {"barrier", LT_COMM_BARRIER, 0, LT_COMM_FORM_NONE},
    {"send", LT_COMM_SEND, 2, LT_COMM_FORM_VECTOR},
    {"recv", LT_COMM_RECV, 2, LT_COMM_FORM_VECTOR},
    {"recvAnysource", LT_COMM_RECV_ANYSOURCE, 2, LT_COMM_FORM_VECTOR},
};

// The backends, by class: ProcessGroupGloo in libtorch_cpu, ProcessGroupNCCL
// in libtorch_cuda.  Their collective methods share names and parameter
// lists (both override c10d::Backend's virtuals), so one table serves both.
struct Backend {
  std::string_view prefix;
  std::uint32_t backend;
};
constexpr Backend kBackends[] = {
    {"_ZN4c10d16ProcessGroupGloo", LT_COMM_GLOO},
    {"_ZN4c10d16ProcessGroupNCCL", LT_COMM_NCCL},
};

// The points in a collective's life (docs/design-comm.md, "Times"), by the
// mangled name up to the parameter list (torch 1.13 and 2.x differ after it:
// finishWorkGlooError takes its exception_ptr by value in 1.13).
struct Mark {
  std::string_view prefix;
  std::uint32_t what;
};
constexpr Mark kMarks[] = {
    {"_ZN4c10d16ProcessGroupGloo7enqueueE", LT_COMM_MARK_ENQUEUE},
    {"_ZN4c10d16ProcessGroupGloo9AsyncWork14finishWorkGlooE", LT_COMM_MARK_DONE},
    {"_ZN4c10d16ProcessGroupGloo9AsyncWork19finishWorkGlooErrorE", LT_COMM_MARK_DONE_ERROR},
    {"_ZN4c10d4Work4waitE", LT_COMM_MARK_WAIT},
    {"_ZN4c10d7Reducer17all_reduce_bucketE", LT_COMM_MARK_DDP_LAUNCH},
    {"_ZN4c10d7Reducer17finalize_backwardE", LT_COMM_MARK_DDP_FINALIZE},
    {"_ZN4c10d7Reducer21finalize_bucket_denseE", LT_COMM_MARK_DDP_BUCKET_READY},
};

}  // namespace

std::uint64_t comm_site_cookie(std::string_view m) {
  std::uint32_t backend = 0;
  for (const Backend& b : kBackends)
    if (m.starts_with(b.prefix)) {
      backend = b.backend;
      m.remove_prefix(b.prefix.size());
      break;
    }
  if (!backend) return 0;
  // <length><name>E<parameters>: a method of the class itself, not of a nested class
  std::size_t len = 0, i = 0;
  while (i < m.size() && m[i] >= '0' && m[i] <= '9') len = len * 10 + static_cast<std::size_t>(m[i++] - '0');
  if (!i || i + len >= m.size() || m[i + len] != 'E') return 0;
  const std::string_view name = m.substr(i, len);
  for (const Method& x : kMethods)
    if (x.name == name) return LT_COMM_COOKIE(std::uint64_t{x.kind}, std::uint64_t{backend}, x.reg, x.form);
  return 0;
}

std::uint32_t comm_mark_what(std::string_view m) {
  for (const Mark& x : kMarks)
    if (m.starts_with(x.prefix)) return x.what;
  return 0;
}

std::vector<CommSite> find_function_sites(const std::string& path, const SiteClassifier& classify) {
  const elf::ElfImage file(path);
  if (file.problem() == elf::ElfImage::Problem::cannot_open)
    throw Error(ExitCode::io, "cannot open " + path + ": " + std::strerror(file.error()));
  std::vector<CommSite> out;
  if (!file.ok() || !file.is_elf64()) return out;
  file.for_each_symbol(
      [&](const elf::SymbolEntry& s) {
        if (!s.defined() || s.value == 0 || s.type != STT_FUNC) return;
        const auto [cookie, mark] = classify(s.name);
        if (!cookie) return;
        const auto off = file.file_offset(s.value, true);
        if (!off) return;
        for (const auto& o : out)
          if (o.file_offset == *off) return;  // one probe per address (aliases)
        out.push_back({*off, cookie, std::string(s.name), mark});
      },
      elf::ElfImage::Tables::dynamic_only);
  return out;
}

std::vector<CommSite> find_comm_sites(const std::string& path) {
  auto out = find_function_sites(path, [](std::string_view name) -> std::pair<std::uint64_t, bool> {
    const std::uint64_t what = comm_mark_what(name);
    return {what ? what : comm_site_cookie(name), what != 0};
  });
  // Without a collective there is nothing to time: a file with only the
  // marks (Work::wait, the Reducer) gives an empty list, as before.
  if (std::none_of(out.begin(), out.end(), [](const CommSite& s) { return !s.mark; })) out.clear();
  return out;
}

}  // namespace lt
