#include "user/watch/flight_ring.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
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

// A previous watcher's ring: its segment files (plain files only; a link
// is removed, never followed).
void clear_old_ring(const std::string& ring) {
  DIR* d = opendir(ring.c_str());
  if (!d) return;
  std::vector<std::string> gone;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if ((name.rfind("seg-", 0) == 0 || name == "names.ltrace") && name.size() < 64) gone.push_back(name);
  }
  closedir(d);
  for (const auto& name : gone) unlinkat(AT_FDCWD, (ring + "/" + name).c_str(), 0);
}

lt_window_event window(bool begin, std::uint64_t ts) {
  lt_window_event w{};
  w.hdr.kind = LT_EV_WINDOW;
  w.hdr.size = sizeof w;
  w.hdr.ts_ns = ts;
  w.begin = begin ? 1 : 0;
  return w;
}

}  // namespace

FlightRing::FlightRing(FlightRingOptions o) : o_(std::move(o)), ring_(o_.dir + "/ring") {
  make_output_dirs(ring_);
  clear_old_ring(ring_);
  names_ = std::make_unique<tracefile::TraceWriter>(ring_ + "/names.ltrace");
}

FlightRing::~FlightRing() {
  try {
    close();
  } catch (const Error&) {  // said by whoever closed first; the chunks written stay
  }
}

void FlightRing::start_segment(std::uint64_t now_ns) {
  char name[64];
  std::snprintf(name, sizeof name, "/seg-%08llu.ltrace", static_cast<unsigned long long>(next_seq_++));
  cur_ = Segment{ring_ + name, 0, 0, 0};
  cur_started_ns_ = now_ns;
  writer_ = std::make_unique<tracefile::TraceWriter>(cur_.path);
}

void FlightRing::finish_segment() {
  if (!writer_) return;
  writer_->close();
  cur_.bytes = writer_->bytes_written();
  writer_.reset();
  if (cur_.first_ns)
    done_.push_back(cur_);
  else
    unlinkat(AT_FDCWD, cur_.path.c_str(), 0);  // nothing in it
}

void FlightRing::add(const lt_event_header& h, const std::byte* record) {
  switch (keep_in_window(h.kind)) {
    case KeepInWindow::name:
      names_->append(record, h.size);
      return;
    case KeepInWindow::frame:
      return;                    // each window writes its own
    case KeepInWindow::segment:  // a name of this segment's events: dropped with them
    case KeepInWindow::event:
      break;
  }
  if (!writer_) start_segment(h.ts_ns);
  writer_->append(record, h.size);
  if (!cur_.first_ns || h.ts_ns < cur_.first_ns) cur_.first_ns = h.ts_ns;
  cur_.last_ns = std::max(cur_.last_ns, h.ts_ns);
}

void FlightRing::tick(std::uint64_t now_ns) {
  if (writer_ && now_ns - cur_started_ns_ >= segment_length(o_)) {
    finish_segment();
    ++segments_ended_;  // the writer names the next segment's lines again (segments_ended)
  }
  if (writer_) writer_->maybe_flush(now_ns);
  names_->maybe_flush(now_ns);
  drop_old(now_ns);
}

std::uint64_t FlightRing::next_due_ns() const {
  std::uint64_t due = names_->next_flush_ns();
  if (writer_) due = std::min({due, cur_started_ns_ + segment_length(o_), writer_->next_flush_ns()});
  if (!done_.empty()) due = std::min(due, done_.front().last_ns + o_.keep_ns + 1);
  return due;
}

void FlightRing::drop_old(std::uint64_t now_ns) {
  const std::uint64_t current = writer_ ? writer_->bytes_written() : 0;
  std::uint64_t total = current;
  for (const auto& s : done_) total += s.bytes;
  while (!done_.empty() &&
         (total > o_.keep_bytes || (now_ns > o_.keep_ns && done_.front().last_ns < now_ns - o_.keep_ns))) {
    total -= done_.front().bytes;
    unlinkat(AT_FDCWD, done_.front().path.c_str(), 0);
    done_.pop_front();
    ++dropped_;
  }
}

std::uint64_t FlightRing::bytes() const {
  std::uint64_t total = writer_ ? writer_->bytes_written() : 0;
  for (const auto& s : done_) total += s.bytes;
  return total;
}

std::uint64_t FlightRing::names_bytes() const {
  return names_ ? names_->bytes_written() : 0;
}

std::uint64_t FlightRing::oldest_ns() const {
  if (!done_.empty()) return done_.front().first_ns;
  return writer_ ? cur_.first_ns : 0;
}

std::uint64_t FlightRing::write_window(const std::string& path, std::uint64_t from_ns, std::uint64_t to_ns,
                                       const std::vector<std::vector<std::byte>>& frame,
                                       const std::function<bool(std::uint32_t pid)>& keep) {
  if (writer_) writer_->flush();
  names_->flush();
  tracefile::TraceWriter out(path);
  std::uint64_t n = 0;
  auto copy = [&](const lt_event_header& h, const std::byte* p) {
    if (keep && h.pid && !keep(h.pid)) return;
    out.append(p, h.size);
    ++n;
  };
  tracefile::read_trace_file(ring_ + "/names.ltrace", copy);
  std::vector<Segment> segments;
  for (const auto& s : done_)
    if (s.first_ns && s.last_ns >= from_ns && s.first_ns <= to_ns) segments.push_back(s);
  if (writer_ && cur_.first_ns && cur_.last_ns >= from_ns && cur_.first_ns <= to_ns) segments.push_back(cur_);
  // The segments' own names (their lines), whatever their time: an event in
  // the window may be named by one written before it, in its segment.
  for (const auto& s : segments)
    tracefile::read_trace_file(s.path, [&](const lt_event_header& h, const std::byte* p) {
      if (keep_in_window(h.kind) == KeepInWindow::segment) copy(h, p);
    });
  const auto begin = window(true, from_ns);
  out.append(&begin, sizeof begin);
  for (const auto& r : frame) out.append(r.data(), r.size());
  for (const auto& s : segments)
    tracefile::read_trace_file(s.path, [&](const lt_event_header& h, const std::byte* p) {
      if (h.ts_ns >= from_ns && h.ts_ns <= to_ns && keep_in_window(h.kind) != KeepInWindow::segment) copy(h, p);
    });
  const auto end = window(false, to_ns);
  out.append(&end, sizeof end);
  out.close();
  return n;
}

void FlightRing::close() {
  finish_segment();
  if (names_) names_->close();
  names_.reset();
}

}  // namespace lt
