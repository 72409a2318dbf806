// Pairs the two words the session gets about each exec of a followed
// process: its PROC_EXEC record (through the ring, in order with the
// process's other records) and the holder's verdict (held for its probes,
// or not; user/collector/target_holder.h).  A process is adopted once each
// of its records has its verdict: the record first, so that the tracker has
// forgotten the old image before the new one is adopted, and the verdict,
// so that a CPython is adopted once it is held where its probes can go in.
// The session takes the verdicts before it reads the ring: BPF writes the
// record before it wakes the holder, so a verdict's record is never behind
// it.  Pure bookkeeping, no clocks of its own.
//
// Either word can be lost (a full ring, a holder thread that could not
// start): after `patience_ns` the other one is enough.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <vector>

namespace lt {

class ExecPairing {
 public:
  struct Ready {
    pid_t pid = 0;
    bool held = false;        // the holder holds it: release it once adopted
    bool not_python = false;  // the holder saw an image that is no CPython
  };

  explicit ExecPairing(std::uint64_t patience_ns) : patience_ns_(patience_ns) {}

  void record(pid_t pid, std::uint64_t now_ns);
  void verdict(pid_t pid, bool held, bool python, std::uint64_t now_ns);
  // The processes to adopt now, each once per pairing.
  std::vector<Ready> ready(std::uint64_t now_ns);
  bool empty() const { return pending_.empty(); }

 private:
  struct Pending {
    int records = 0;
    int verdicts = 0;
    bool held = false;           // some verdict held it
    bool python = false;         // some verdict saw a CPython
    std::uint64_t since_ns = 0;  // when the first unpaired word came
  };
  std::uint64_t patience_ns_;
  std::map<pid_t, Pending> pending_;
};

}  // namespace lt
