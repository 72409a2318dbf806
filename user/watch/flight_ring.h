// Watch mode's flight recorder: the last --keep of the record stream, on
// disk in DIR/ring as segment files, oldest dropped whole.
//
// Each segment is a trace file (user/tracefile: chunks written at least
// once a second, so a killed watcher leaves readable segments). Records a
// later window needs from before it, whatever its start (names: code
// objects, op names, processes, the host: KeepInWindow::name in the record
// catalogue), go to DIR/ring/names.ltrace instead, kept for the watcher's
// life; it grows only with new names. Names there would be too many of over
// days (the line of each sampled instruction: KeepInWindow::segment) stay in
// their segment and go with it: the writer names them again in each segment
// (segments_ended() says when one began). A window (a capture) is the
// names, the segment names of the segments it overlaps, then the events of
// those segments whose times fall in it, between WINDOW records of its own.
//
// A disk that fills (or a DIR that stops taking writes) never ends the
// watcher: the segment being written keeps its whole chunks, its records
// not yet written and those after them go to segments in memory (bounded
// by --keep-bytes and kMemoryBytes, oldest dropped whole as on disk), said
// once on stderr; each new segment tries the disk again after retry_ns, and
// the ring is back on disk once one closes whole. The names are kept in
// memory as well (they grow only with new names), so a window is whole
// whichever side its segments are on.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bpf/events.h"

namespace lt {
namespace tracefile {
class TraceWriter;
}  // namespace tracefile

struct FlightRingOptions {
  std::string dir;                          // the ring is DIR/ring
  std::uint64_t keep_ns = 600'000'000'000;  // --keep: the time kept
  std::uint64_t keep_bytes = 256ull << 20;  // --keep-bytes: the disk kept (segments)
  std::uint64_t segment_ns = 0;             // 0: keep_ns / 20, within [2 s, 60 s]
  std::uint64_t retry_ns = 60'000'000'000;  // after a write error, the disk is tried again this much later
};

// A window of the ring as it was when taken, to be written later on
// another thread than the drain's (a capture's write reads and writes
// megabytes: the drain thread that did it lost records meanwhile). It holds
// what it reads: the names (copied), and the segments it overlaps, each
// whole (the current one was ended first): a file opened when taken, so
// that the ring dropping it meanwhile unlinks a name, not the data; or the
// records in memory, shared (a segment in memory the ring drops meanwhile
// lives on until the window is written: memory may pass kMemoryBytes by a
// window's segments for that while). Move-only; its files close with it.
class WindowCopy {
 public:
  WindowCopy() = default;
  WindowCopy(WindowCopy&& o) noexcept;
  WindowCopy& operator=(WindowCopy&& o) noexcept;
  WindowCopy(const WindowCopy&) = delete;
  WindowCopy& operator=(const WindowCopy&) = delete;
  ~WindowCopy();

  // The window as one trace file at `path` (owner-only); returns its
  // records. `frame`: records of the window's own (STEP_BASE), after its
  // opening WINDOW. `keep`: which processes' records go in (records of no
  // process, pid 0, always do); none: every one. Throws
  // lt::Error(io | unsafe_output | bad_trace).
  std::uint64_t write(const std::string& path, const std::vector<std::vector<std::byte>>& frame = {},
                      const std::function<bool(std::uint32_t pid)>& keep = {}) const;
  std::uint64_t from_ns() const { return from_ns_; }
  std::uint64_t to_ns() const { return to_ns_; }
  std::size_t segments() const { return segments_.size(); }
  // The first record's time of the oldest segment taken (0: none): later
  // than from_ns() when the ring no longer held the window's start.
  std::uint64_t held_from_ns() const { return held_from_ns_; }
  // The segments of `older` (a window of the same ring taken earlier: a
  // trigger's before-window, held from the trigger on) that this one no
  // longer has, the ring having dropped them since: put first, their files
  // held here. Its names are kept too.
  void add_older(WindowCopy&& older);

 private:
  friend class FlightRing;
  struct Part {
    int fd = -1;  // a segment on disk, opened when taken
    std::string path;
    std::shared_ptr<const std::vector<std::byte>> records;  // one in memory
  };
  void read(const Part& p, const std::function<void(const lt_event_header&, const std::byte*)>& f) const;
  std::uint64_t from_ns_ = 0, to_ns_ = 0, held_from_ns_ = 0;
  std::vector<std::byte> names_;
  std::vector<Part> segments_;
};

class FlightRing {
 public:
  // Makes DIR/ring. A previous watcher's ring there becomes one trace file,
  // DIR/previous-ring.ltrace (replacing the one before), and its segments go.
  // Throws lt::Error(io | unsafe_output).
  explicit FlightRing(FlightRingOptions o);
  ~FlightRing();
  FlightRing(const FlightRing&) = delete;
  FlightRing& operator=(const FlightRing&) = delete;

  void add(const lt_event_header& h, const std::byte* record);
  // Starts a new segment when the current one is old enough, drops the
  // oldest past --keep or --keep-bytes, and writes what waits each second.
  void tick(std::uint64_t now_ns);
  // When tick() next has work: a segment to end, a chunk to flush, the
  // oldest segment past --keep (UINT64_MAX: none).
  std::uint64_t next_due_ns() const;
  // The window [from, to] taken now, to be written later (WindowCopy): the
  // current segment ends first when the window overlaps it, as at tick()
  // (segments_ended() moves: call it between drains). Throws
  // lt::Error(io) when a segment's file cannot be opened.
  WindowCopy take_window(std::uint64_t from_ns, std::uint64_t to_ns);
  // The segments' bytes now, on disk and in memory (the names apart).
  std::uint64_t bytes() const;
  std::uint64_t names_bytes() const;
  // Segments in memory (the disk refused writes): their bytes, and whether
  // new records go there now.
  std::uint64_t memory_bytes() const;
  bool in_memory() const { return in_memory_; }
  std::uint64_t write_errors() const { return write_errors_; }
  // The most the segments in memory hold, whatever --keep-bytes.
  static constexpr std::uint64_t kMemoryBytes = 64ull << 20;
  std::uint64_t segments_dropped() const { return dropped_; }
  // Segments ended so far: when it changes, the records of the next one need
  // their segment names again.
  std::uint64_t segments_ended() const { return segments_ended_; }
  std::uint64_t oldest_ns() const;  // the oldest record kept (0: none)
  void close();                     // writes what waits; the files stay
  // pid's names go (from memory, and the names file rewritten): the
  // watcher forgets a process once no window can want it, so that a watcher
  // of --all over days keeps the names of what lives, not of every process
  // it ever met. Names of no process (pid 0: the host) stay.
  void forget(std::uint32_t pid, std::uint64_t now_ns);

 private:
  struct Segment {
    std::string path;  // "": in memory
    std::uint64_t first_ns = 0, last_ns = 0, bytes = 0;
    std::shared_ptr<std::vector<std::byte>> records;  // in memory: the records, as appended
  };
  void start_segment(std::uint64_t now_ns);
  void finish_segment();
  void drop_old(std::uint64_t now_ns);
  // Runs a disk write; a failure moves the ring to memory (said once).
  template <typename F>
  void on_disk(F&& write, std::uint64_t now_ns);
  void to_memory(const std::string& why, std::uint64_t now_ns);
  void append_to_memory(const std::byte* record, std::size_t size);

  FlightRingOptions o_;
  std::string ring_;
  std::deque<Segment> done_;
  Segment cur_;
  std::uint64_t cur_started_ns_ = 0;
  std::uint64_t next_seq_ = 0, dropped_ = 0, segments_ended_ = 0;
  std::unique_ptr<tracefile::TraceWriter> writer_, names_;
  std::vector<std::byte> names_kept_;  // every name record, also in memory
  bool in_memory_ = false;
  bool said_memory_ = false;  // the move to memory was said; said again only after a return to disk
  std::uint64_t retry_at_ns_ = 0, write_errors_ = 0;
};

}  // namespace lt
