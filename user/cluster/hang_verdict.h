// `cluster ... dump`'s verdict: from every rank's dump, which ranks wait in
// a c10d collective and which have not entered it, and where those are.
// Pure: a function of the dumps.
//
// What a dump shows, and so what the verdict rests on:
//  * a collective is a Python frame of torch/distributed/distributed_c10d.py
//    whose function is one of c10d's collective or point-to-point entry
//    points (all_reduce, broadcast, barrier, ...; the outermost such frame,
//    the one the user's code called);
//  * a rank *waits* in it when a thread of it was seen there blocked in the
//    same system call in both of its agent's reads, and never ran in between
//    (ThreadDump::blocked_at_least_s > 0): a snapshot of a healthy job
//    catches ranks inside collectives all the time, two reads do not;
//  * DDP's gradient all-reduce has no c10d Python frame (the reducer runs
//    it in C++ under backward()): a thread blocked across both reads inside
//    autograd's backward() counts as waiting in kBackward ("backward", the
//    reducer's wait, most likely); since a long backward looks the same, it
//    is a hang only when some rank is not waiting there;
//  * not known: the collective's sequence number and process group (they
//    live in C++ objects and the frame's locals, which a dump does not
//    read), so ranks "in all_reduce" may be at different calls of it.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "user/cluster/dump_lines.h"

namespace lt::cluster {

inline constexpr const char* kBackward = "backward";

// The c10d entry point `frames` (innermost first) are inside: the
// outermost distributed_c10d.py frame with a collective's name; "" if none.
std::string collective_of(const std::vector<python::PyFrameInfo>& frames);

// The innermost frame of the user's own code: not the standard library,
// not site-packages/dist-packages, not <frozen ...>.  nullptr when every
// frame is library code (then the innermost frame stands for it).
const python::PyFrameInfo* innermost_user_frame(const std::vector<python::PyFrameInfo>& frames);

// Where one rank is: the thread the verdict speaks of.
struct RankPlace {
  int rank = -1;
  std::string node;
  pid_t pid = 0, tid = 0;
  std::string collective;                    // "" when not inside one
  std::optional<python::PyFrameInfo> where;  // innermost user frame (else innermost frame)
  char state = '?';                          // 'R' running, 'S' sleeping, ...
  long syscall = -1;                         // blocked in; -1: none
  double blocked_s = 0;                      // ThreadDump::blocked_at_least_s
};

struct Verdict {
  bool hang = false;                        // some rank waits in a collective (above)
  std::string collective;                   // the one most waiting ranks wait in
  double waited_s = 0;                      // the least blocked_at_least_s among them
  std::vector<RankPlace> waiting;           // wait in `collective`, by rank
  std::vector<RankPlace> other_collective;  // wait in another collective
  std::vector<RankPlace> not_waiting;       // the other ranks read: where they are
  std::vector<int> unread;                  // ranks below the world size that no agent read
  std::vector<RankPlace> inside_now;        // no hang: ranks seen inside a collective once (not waiting)
  int ranks_read = 0;
};

Verdict hang_verdict(const std::vector<RankProcess>& processes);

// "0-2,4,6-7".
std::string rank_ranges(std::vector<int> ranks);

}  // namespace lt::cluster
