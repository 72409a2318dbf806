// What a node agent (`ltrace-bpf agent`) tells the `cluster` coordinator on
// its stdout, which srun carries back: one status line per event, each
// "@ltrace-agent KIND key=value ...", and, when the trace cannot be written
// to a shared directory, the trace file itself as base64 lines between
// "@ltrace-agent file bytes=N" and "@ltrace-agent end".  Lines are text so
// that srun's line handling cannot corrupt them; anything else on stdout is
// passed through as the node's output.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lt::cluster {

inline constexpr const char* kAgentPrefix = "@ltrace-agent ";

struct AgentMessage {
  std::string kind;  // hello, attached, clock, done, failed, file, end
  std::map<std::string, std::string> fields;
  std::string field(const std::string& k, const std::string& dflt = "") const {
    auto it = fields.find(k);
    return it == fields.end() ? dflt : it->second;
  }
};

// Values are percent-encoded (%XX for '%', ' ', '=' and control bytes), so
// any text (an error message) fits in one line.
std::string agent_line(const std::string& kind, const std::vector<std::pair<std::string, std::string>>& fields);
std::optional<AgentMessage> parse_agent_line(const std::string& line);

// RFC 4648 base64, 76 characters a line when wrapped.
std::string base64_encode(const unsigned char* data, std::size_t n);
// Appends the decoded bytes of one line; false on a character outside the
// alphabet (whitespace and '\r' are skipped).
bool base64_decode_append(const std::string& line, std::string& out);

}  // namespace lt::cluster
