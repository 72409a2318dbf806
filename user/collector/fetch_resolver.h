// Names a dataloader fetch seen on CPython 3.11+ (CombinedLoader.__next__
// entered from C) the way Lightning names it, from the code objects of the
// frames that called it: _TrainingEpochLoop.advance -> train_dataloader_next,
// _EvaluationLoop.run -> {eval}_next (val or test, decided by the
// aggregator), _PredictionLoop.run -> predict_next.
#pragma once
#include <sys/types.h>

#include <map>
#include <optional>
#include <string>

#include "bpf/events.h"
#include "user/python/offsets.h"

namespace lt {

class FetchResolver {
 public:
  // The action name, or nullopt if this is not a fetch Lightning profiles.
  std::optional<std::string> resolve(pid_t pid, const python::Layout& layout, const lt_fetch_event& e);

 private:
  struct CodeInfo {
    std::string name, filename;
  };
  std::optional<CodeInfo> code_info(pid_t pid, const python::Layout& layout, std::uint64_t code);
  std::optional<std::string> type_name(pid_t pid, const python::Layout& layout, std::uint64_t obj);
  std::map<std::pair<pid_t, std::uint64_t>, std::optional<CodeInfo>> code_cache_;
};

// Reads a compact ASCII str object from the target.
std::optional<std::string> read_py_ascii(pid_t pid, const python::Layout& layout, std::uint64_t str);

}  // namespace lt
