#include "user/cluster/streamed_file.h"

#include <string_view>

#include "user/cluster/agent_protocol.h"
#include "user/core/errors.h"

namespace lt::cluster {

void StreamedFile::begin(const std::string& path, std::uint64_t expect) {
  path_ = path;
  expect_ = expect;
  received_ = 0;
  receiving_ = true;
  whole_ = false;
  error_.clear();
  out_.reset();
  try {
    out_ = std::make_unique<OutputFile>(path, OutputMode::truncate, OutputAccess::owner_only);
  } catch (const Error& e) {
    error_ = e.what();
  }
}

bool StreamedFile::take(const std::string& line) {
  const std::string_view prefix = kAgentPrefix, l = line;
  if (l.starts_with(prefix) && l.substr(prefix.size()).starts_with("end")) {
    receiving_ = false;
    whole_ = out_ && received_ == expect_;
    try {
      if (out_) out_->close();
    } catch (const Error& e) {
      whole_ = false;
      error_ = e.what();
    }
    out_.reset();
    return true;
  }
  std::string bytes;
  if (!base64_decode_append(line, bytes)) {
    error_ = "the streamed file is corrupt";
    return false;
  }
  received_ += bytes.size();
  if (out_) out_->stream().write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return false;
}

void StreamedFile::abandon() {
  if (!receiving_ && !out_) return;
  receiving_ = false;
  whole_ = false;
  try {
    if (out_) out_->close();
  } catch (const Error&) {
  }
  out_.reset();
}

}  // namespace lt::cluster
