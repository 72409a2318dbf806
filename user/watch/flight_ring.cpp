#include "user/watch/flight_ring.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <vector>

#include "user/core/errors.h"
#include "user/core/output_file.h"
#include "user/model/record_kinds.h"
#include "user/tracefile/trace_reader.h"
#include "user/tracefile/trace_writer.h"

namespace lt {

namespace {

std::uint64_t segment_length(const FlightRingOptions& o) {
  if (o.segment_ns) return o.segment_ns;
  return std::clamp<std::uint64_t>(o.keep_ns / 20, 2'000'000'000, 60'000'000'000);
}

// A previous watcher's ring (one killed, or stopped): its names and its
// segments in order, copied into one trace file (`out`, replacing the one
// before), so that what it had kept outlives a restart and `report` reads
// it; then its files are removed (plain files only; a link is removed,
// never followed). Said on stderr.
void keep_previous_ring(const std::string& ring, const std::string& out) {
  DIR* d = opendir(ring.c_str());
  if (!d) return;
  std::vector<std::string> segments;
  bool names = false;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("seg-", 0) == 0 && name.size() < 64) segments.push_back(name);
    names |= name == "names.ltrace";
  }
  closedir(d);
  std::sort(segments.begin(), segments.end());  // seg-%08llu: in the order written
  if (!segments.empty()) {
    // Written beside, then renamed over the one before: an empty or failed
    // copy leaves that one as it was.
    const std::string fresh = out + ".new";
    try {
      tracefile::TraceWriter w(fresh);
      std::uint64_t records = 0;
      bool writing = false;  // an error while writing ends the copy; one while reading skips that file
      auto copy = [&](const lt_event_header& h, const std::byte* p) {
        writing = true;
        w.append(p, h.size);
        writing = false;
        ++records;
      };
      std::string skipped;
      auto copy_file = [&](const std::string& name) {
        try {
          tracefile::read_trace_file(ring + "/" + name, copy);
        } catch (const Error& e) {
          if (writing) throw;
          skipped += (skipped.empty() ? "" : ", ") + name;  // empty (a start the disk refused) or cut
        }
      };
      if (names) copy_file("names.ltrace");
      for (const auto& s : segments) copy_file(s);
      w.close();
      if (!skipped.empty())
        std::fprintf(stderr, "ltrace-bpf: watch: the previous watcher's %s not read (empty or not a trace)\n",
                     skipped.c_str());
      if (!records) {
        unlinkat(AT_FDCWD, fresh.c_str(), 0);
        std::fprintf(stderr,
                     "ltrace-bpf: watch: the previous watcher's flight recorder had no whole chunk on disk "
                     "(it ended within a second of its start): nothing to keep\n");
      } else if (rename(fresh.c_str(), out.c_str()) != 0) {
        throw Error(ExitCode::io, "cannot rename " + fresh + " to " + out + ": " + std::strerror(errno));
      } else {
        std::fprintf(stderr,
                     "ltrace-bpf: watch: the previous watcher's flight recorder (%zu segment(s), %llu records) "
                     "is kept in %s\n",
                     segments.size(), static_cast<unsigned long long>(records), out.c_str());
      }
    } catch (const Error& e) {
      unlinkat(AT_FDCWD, fresh.c_str(), 0);
      std::fprintf(stderr, "ltrace-bpf: watch: the previous watcher's flight recorder is not kept: %s\n", e.what());
    }
  }
  for (const auto& s : segments) unlinkat(AT_FDCWD, (ring + "/" + s).c_str(), 0);
  if (names) unlinkat(AT_FDCWD, (ring + "/names.ltrace").c_str(), 0);
}

lt_window_event window(bool begin, std::uint64_t ts) {
  lt_window_event w{};
  w.hdr.kind = LT_EV_WINDOW;
  w.hdr.size = sizeof w;
  w.hdr.ts_ns = ts;
  w.begin = begin ? 1 : 0;
  return w;
}

// Each whole record of records appended back to back.
void for_each_record(const std::vector<std::byte>& r,
                     const std::function<void(const lt_event_header&, const std::byte*)>& f) {
  for (std::size_t at = 0; at + sizeof(lt_event_header) <= r.size();) {
    lt_event_header h;
    std::memcpy(&h, r.data() + at, sizeof h);
    if (h.size < sizeof h || at + h.size > r.size()) break;
    f(h, r.data() + at);
    at += h.size;
  }
}

}  // namespace

FlightRing::FlightRing(FlightRingOptions o) : o_(std::move(o)), ring_(o_.dir + "/ring") {
  make_output_dirs(ring_);
  keep_previous_ring(ring_, o_.dir + "/previous-ring.ltrace");
  names_ = std::make_unique<tracefile::TraceWriter>(ring_ + "/names.ltrace");
}

FlightRing::~FlightRing() {
  try {
    close();
  } catch (const Error&) {  // said by whoever closed first; the chunks written stay
  }
}

template <typename F>
void FlightRing::on_disk(F&& write, std::uint64_t now_ns) {
  try {
    write();
  } catch (const Error& e) {
    if (e.code() != ExitCode::io && e.code() != ExitCode::unsafe_output) throw;
    to_memory(e.what(), now_ns);
  }
}

void FlightRing::to_memory(const std::string& why, std::uint64_t now_ns) {
  ++write_errors_;
  retry_at_ns_ = now_ns + o_.retry_ns;
  const bool was_on_disk = !in_memory_;
  in_memory_ = true;
  // The names file is rewritten whole from memory when the disk is back.
  if (names_) names_->abandon();
  names_.reset();
  if (writer_) {
    // Its whole chunks stay a segment on disk; what it had not written
    // yet starts the segment in memory.
    auto pending = writer_->take_pending();
    writer_->abandon();
    Segment disk = cur_;
    disk.bytes = writer_->bytes_written();
    writer_.reset();
    if (disk.first_ns) done_.push_back(disk);
    cur_ = Segment{"", 0, 0, 0, std::make_shared<std::vector<std::byte>>()};
    cur_started_ns_ = now_ns;
    const auto* p = reinterpret_cast<const std::byte*>(pending.data());
    for_each_record(std::vector<std::byte>(p, p + pending.size()),
                    [&](const lt_event_header& h, const std::byte* r) { append_to_memory(r, h.size); });
    // A new segment: the records after this name their lines again.
    ++segments_ended_;
  }
  if (was_on_disk && !said_memory_) {
    said_memory_ = true;
    std::fprintf(stderr,
                 "ltrace-bpf: watch: %s; the flight recorder goes on in memory (at most %llu MiB), and tries %s again "
                 "every %llu s\n",
                 why.c_str(), static_cast<unsigned long long>(std::min(o_.keep_bytes, kMemoryBytes) >> 20),
                 ring_.c_str(), static_cast<unsigned long long>(o_.retry_ns / 1'000'000'000));
  }
}

void FlightRing::append_to_memory(const std::byte* record, std::size_t size) {
  lt_event_header h;
  std::memcpy(&h, record, sizeof h);
  cur_.records->insert(cur_.records->end(), record, record + size);
  cur_.bytes = cur_.records->size();
  if (!cur_.first_ns || h.ts_ns < cur_.first_ns) cur_.first_ns = h.ts_ns;
  cur_.last_ns = std::max(cur_.last_ns, h.ts_ns);
}

void FlightRing::start_segment(std::uint64_t now_ns) {
  cur_started_ns_ = now_ns;
  if (in_memory_ && now_ns >= retry_at_ns_) {
    // The disk again: the names first (whole, from memory), then the segment.
    in_memory_ = false;
    on_disk(
        [&] {
          names_ = std::make_unique<tracefile::TraceWriter>(ring_ + "/names.ltrace");
          for_each_record(names_kept_,
                          [&](const lt_event_header& h, const std::byte* r) { names_->append(r, h.size); });
          names_->flush();
        },
        now_ns);
  }
  if (!in_memory_) {
    char name[64];
    std::snprintf(name, sizeof name, "/seg-%08llu.ltrace", static_cast<unsigned long long>(next_seq_++));
    cur_ = Segment{ring_ + name, 0, 0, 0, nullptr};
    on_disk([&] { writer_ = std::make_unique<tracefile::TraceWriter>(cur_.path); }, now_ns);
    if (writer_) return;
    unlinkat(AT_FDCWD, cur_.path.c_str(), 0);  // not even its header: no file left behind
  }
  cur_ = Segment{"", 0, 0, 0, std::make_shared<std::vector<std::byte>>()};
}

void FlightRing::finish_segment() {
  if (writer_) {
    on_disk([&] { writer_->close(); }, cur_.last_ns);
    if (!writer_) return;  // to_memory kept what was written, and what was not
    cur_.bytes = writer_->bytes_written();
    writer_.reset();
    if (said_memory_) {  // a segment closed whole
      said_memory_ = false;
      std::fprintf(stderr, "ltrace-bpf: watch: %s takes writes again: the flight recorder is back on disk\n",
                   ring_.c_str());
    }
    if (cur_.first_ns)
      done_.push_back(cur_);
    else
      unlinkat(AT_FDCWD, cur_.path.c_str(), 0);  // nothing in it
    cur_ = Segment{};
    return;
  }
  if (cur_.records && cur_.first_ns) done_.push_back(cur_);
  cur_ = Segment{};
}

void FlightRing::add(const lt_event_header& h, const std::byte* record) {
  switch (keep_in_window(h.kind)) {
    case KeepInWindow::name:
      names_kept_.insert(names_kept_.end(), record, record + h.size);
      if (names_) on_disk([&] { names_->append(record, h.size); }, h.ts_ns);
      return;
    case KeepInWindow::frame:
      return;                    // each window writes its own
    case KeepInWindow::segment:  // a name of this segment's events: dropped with them
    case KeepInWindow::event:
      break;
  }
  if (!writer_ && !cur_.records) start_segment(h.ts_ns);
  if (writer_) {
    on_disk([&] { writer_->append(record, h.size); }, h.ts_ns);
    if (writer_) {
      if (!cur_.first_ns || h.ts_ns < cur_.first_ns) cur_.first_ns = h.ts_ns;
      cur_.last_ns = std::max(cur_.last_ns, h.ts_ns);
    }
    return;  // else to_memory kept it: it was pending in the writer
  }
  append_to_memory(record, h.size);
}

void FlightRing::tick(std::uint64_t now_ns) {
  // Segments end here, between drains, never inside one: the session names
  // the next segment's lines again when segments_ended() moves, before its
  // records. One ends at its length, and one in memory also at an eighth of
  // what memory may hold, so that the oldest can go whole while the newest
  // fills (an escalated window writes megabytes a second).
  const bool full_in_memory = cur_.records && cur_.bytes > std::min(o_.keep_bytes, kMemoryBytes) / 8;
  // On disk too, at an eighth of --keep-bytes: a segment bigger than the
  // bound would be dropped whole the moment it ends (a capture ends it: an
  // audit's --keep-bytes 4M held a 21 MB segment, and the captures taken
  // after the first found it gone).
  const bool full_on_disk = writer_ && writer_->bytes_written() > o_.keep_bytes / 8;
  if (full_in_memory || full_on_disk || ((writer_ || cur_.records) && now_ns - cur_started_ns_ >= segment_length(o_))) {
    finish_segment();
    ++segments_ended_;
  }
  if (writer_) on_disk([&] { writer_->maybe_flush(now_ns); }, now_ns);
  if (names_) on_disk([&] { names_->maybe_flush(now_ns); }, now_ns);
  drop_old(now_ns);
}

std::uint64_t FlightRing::next_due_ns() const {
  std::uint64_t due = names_ ? names_->next_flush_ns() : UINT64_MAX;
  if (writer_) due = std::min({due, cur_started_ns_ + segment_length(o_), writer_->next_flush_ns()});
  if (cur_.records) due = std::min(due, cur_started_ns_ + segment_length(o_));
  if (!done_.empty()) due = std::min(due, done_.front().last_ns + o_.keep_ns + 1);
  return due;
}

void FlightRing::drop_old(std::uint64_t now_ns) {
  const std::uint64_t memory_cap = std::min(o_.keep_bytes, kMemoryBytes);
  std::uint64_t total = writer_ ? writer_->bytes_written() : cur_.bytes;
  std::uint64_t in_memory = cur_.records ? cur_.bytes : 0;
  for (const auto& s : done_) {
    total += s.bytes;
    if (s.records) in_memory += s.bytes;
  }
  auto drop = [&](std::deque<Segment>::iterator it) {
    total -= it->bytes;
    if (it->records)
      in_memory -= it->bytes;
    else
      unlinkat(AT_FDCWD, it->path.c_str(), 0);
    ++dropped_;
    return done_.erase(it);
  };
  // Memory over its bound: its oldest segments go (not the disk's, which
  // cost no memory).
  for (auto it = done_.begin(); it != done_.end() && in_memory > memory_cap;)
    it = it->records ? drop(it) : std::next(it);
  while (!done_.empty() &&
         (total > o_.keep_bytes || (now_ns > o_.keep_ns && done_.front().last_ns < now_ns - o_.keep_ns)))
    drop(done_.begin());
}

std::uint64_t FlightRing::bytes() const {
  std::uint64_t total = writer_ ? writer_->bytes_written() : cur_.bytes;
  for (const auto& s : done_) total += s.bytes;
  return total;
}

std::uint64_t FlightRing::memory_bytes() const {
  std::uint64_t total = cur_.records ? cur_.bytes : 0;
  for (const auto& s : done_)
    if (s.records) total += s.bytes;
  return total;
}

std::uint64_t FlightRing::names_bytes() const {
  return names_kept_.size();
}

std::uint64_t FlightRing::oldest_ns() const {
  if (!done_.empty()) return done_.front().first_ns;
  return cur_.first_ns;
}

WindowCopy FlightRing::take_window(std::uint64_t from_ns, std::uint64_t to_ns) {
  auto overlaps = [&](const Segment& s) { return s.first_ns && s.last_ns >= from_ns && s.first_ns <= to_ns; };
  // The current segment ends first when the window wants it: every segment
  // taken is then whole, its file closed or its records appended no more.
  if ((writer_ || cur_.records) && overlaps(cur_)) {
    finish_segment();
    if (cur_.records) finish_segment();  // a close the disk refused: the rest went to memory, a segment too
    ++segments_ended_;
  }
  WindowCopy w;
  w.from_ns_ = from_ns;
  w.to_ns_ = to_ns;
  w.names_ = names_kept_;
  for (const auto& s : done_) {
    if (!overlaps(s)) continue;
    if (!w.held_from_ns_ || s.first_ns < w.held_from_ns_) w.held_from_ns_ = s.first_ns;
    WindowCopy::Part p;
    p.path = s.path;
    p.records = s.records;
    if (!s.records) {
      p.fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (p.fd < 0) throw Error(ExitCode::io, "cannot open " + s.path + ": " + std::strerror(errno));
    }
    w.segments_.push_back(std::move(p));
  }
  return w;
}

WindowCopy::WindowCopy(WindowCopy&& o) noexcept {
  *this = std::move(o);
}

WindowCopy& WindowCopy::operator=(WindowCopy&& o) noexcept {
  if (this == &o) return *this;
  for (auto& p : segments_)
    if (p.fd >= 0) ::close(p.fd);
  from_ns_ = o.from_ns_;
  to_ns_ = o.to_ns_;
  held_from_ns_ = o.held_from_ns_;
  names_ = std::move(o.names_);
  segments_ = std::move(o.segments_);
  o.segments_.clear();
  return *this;
}

void WindowCopy::add_older(WindowCopy&& older) {
  std::vector<Part> parts;
  for (auto& p : older.segments_) {
    const bool here = std::any_of(segments_.begin(), segments_.end(),
                                  [&](const Part& q) { return p.records ? q.records == p.records : q.path == p.path; });
    if (here) continue;  // still in the ring: taken again by this window
    parts.push_back(std::move(p));
    p.fd = -1;  // moved: `older` closes it no more
  }
  if (parts.empty()) return;
  for (auto& p : segments_) parts.push_back(std::move(p));
  segments_ = std::move(parts);
  // Its names first: a name written again later wins where they differ.
  older.names_.insert(older.names_.end(), names_.begin(), names_.end());
  names_ = std::move(older.names_);
  if (older.held_from_ns_ && (!held_from_ns_ || older.held_from_ns_ < held_from_ns_))
    held_from_ns_ = older.held_from_ns_;
}

WindowCopy::~WindowCopy() {
  for (auto& p : segments_)
    if (p.fd >= 0) ::close(p.fd);
}

void WindowCopy::read(const Part& p, const std::function<void(const lt_event_header&, const std::byte*)>& f) const {
  if (p.records) {
    for_each_record(*p.records, f);
    return;
  }
  // Read twice (its names, then its events): from the start each time.
  if (lseek(p.fd, 0, SEEK_SET) != 0) throw Error(ExitCode::io, "cannot read " + p.path + ": " + std::strerror(errno));
  tracefile::read_trace_fd(p.fd, p.path, f);
}

std::uint64_t WindowCopy::write(const std::string& path, const std::vector<std::vector<std::byte>>& frame,
                                const std::function<bool(std::uint32_t pid)>& keep) const {
  tracefile::TraceWriter out(path);
  std::uint64_t n = 0;
  auto copy = [&](const lt_event_header& h, const std::byte* p) {
    if (keep && h.pid && !keep(h.pid)) return;
    out.append(p, h.size);
    ++n;
  };
  for_each_record(names_, copy);
  // The segments' own names (their lines), whatever their time: an event in
  // the window may be named by one written before it, in its segment.
  for (const auto& s : segments_)
    read(s, [&](const lt_event_header& h, const std::byte* p) {
      if (keep_in_window(h.kind) == KeepInWindow::segment) copy(h, p);
    });
  const auto begin = window(true, from_ns_);
  out.append(&begin, sizeof begin);
  for (const auto& r : frame) out.append(r.data(), r.size());
  for (const auto& s : segments_)
    read(s, [&](const lt_event_header& h, const std::byte* p) {
      if (h.ts_ns >= from_ns_ && h.ts_ns <= to_ns_ && keep_in_window(h.kind) != KeepInWindow::segment) copy(h, p);
    });
  const auto end = window(false, to_ns_);
  out.append(&end, sizeof end);
  out.close();
  return n;
}

void FlightRing::forget(std::uint32_t pid, std::uint64_t now_ns) {
  if (!pid) return;
  std::vector<std::byte> kept;
  kept.reserve(names_kept_.size());
  for_each_record(names_kept_, [&](const lt_event_header& h, const std::byte* r) {
    if (h.pid != pid) kept.insert(kept.end(), r, r + h.size);
  });
  if (kept.size() == names_kept_.size()) return;
  names_kept_ = std::move(kept);
  if (!names_) return;  // in memory: the file is rewritten when the disk is back
  on_disk(
      [&] {
        names_->abandon();
        names_ = std::make_unique<tracefile::TraceWriter>(ring_ + "/names.ltrace");
        for_each_record(names_kept_, [&](const lt_event_header& h, const std::byte* r) { names_->append(r, h.size); });
        names_->flush();
      },
      now_ns);
}

void FlightRing::close() {
  finish_segment();
  if (names_) on_disk([&] { names_->close(); }, 0);
  names_.reset();
  // What the disk never took is lost with the watcher: said, with its count.
  std::uint64_t held = memory_bytes();
  if (held)
    std::fprintf(stderr,
                 "ltrace-bpf: watch: %llu bytes of records held in memory (the disk refused them) end with the "
                 "watcher\n",
                 static_cast<unsigned long long>(held));
  cur_ = Segment{};
  std::erase_if(done_, [](const Segment& s) { return s.records != nullptr; });
}

}  // namespace lt
