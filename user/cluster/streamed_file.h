// A file an agent sends back on its stdout (agent_protocol.h: "file
// bytes=N", then base64 lines, then "end"), written as it arrives: the
// recording agents' traces (coordinator.cpp) and the captures brought
// back by `cluster ... capture -o` (cluster_capture.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "user/core/output_file.h"

namespace lt::cluster {

class StreamedFile {
 public:
  // After "file bytes=N": the N bytes go to `path` (owner-only). A path that
  // cannot be written is kept as error(); the lines are consumed all the same.
  void begin(const std::string& path, std::uint64_t expect);
  // One line while receiving(): base64, or the end line. Returns true at
  // the end (the file closed; whole() says whether every byte came).
  bool take(const std::string& line);
  // The agent stopped mid-stream: what came is closed, not whole.
  void abandon();
  bool receiving() const { return receiving_; }
  bool whole() const { return whole_; }
  const std::string& path() const { return path_; }
  std::uint64_t received() const { return received_; }
  std::uint64_t expected() const { return expect_; }
  const std::string& error() const { return error_; }

 private:
  std::string path_, error_;
  std::unique_ptr<OutputFile> out_;
  bool receiving_ = false, whole_ = false;
  std::uint64_t expect_ = 0, received_ = 0;
};

}  // namespace lt::cluster
