#include "user/cluster/agent_protocol.h"

#include <cstring>

#include "user/text/numbers.h"

namespace lt::cluster {

namespace {

std::string encode_value(const std::string& v) {
  std::string o;
  for (unsigned char c : v) {
    if (c == '%' || c == ' ' || c == '=' || c < 0x20 || c == 0x7f) {
      o += "%" + hex(c, 2, HexCase::upper);
    } else {
      o += static_cast<char>(c);
    }
  }
  return o;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string decode_value(const std::string& v) {
  std::string o;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '%' && i + 2 < v.size() + 0 && hex(v[i + 1]) >= 0 && hex(v[i + 2]) >= 0) {
      o += static_cast<char>(hex(v[i + 1]) * 16 + hex(v[i + 2]));
      i += 2;
    } else {
      o += v[i];
    }
  }
  return o;
}

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string agent_line(const std::string& kind, const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string o = kAgentPrefix + kind;
  for (auto& [k, v] : fields) o += " " + k + "=" + encode_value(v);
  return o;
}

std::optional<AgentMessage> parse_agent_line(const std::string& raw) {
  std::string line = raw;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  const std::size_t plen = std::strlen(kAgentPrefix);
  if (line.compare(0, plen, kAgentPrefix) != 0) return std::nullopt;
  AgentMessage m;
  std::size_t at = plen;
  std::size_t sp = line.find(' ', at);
  m.kind = line.substr(at, sp == std::string::npos ? std::string::npos : sp - at);
  if (m.kind.empty()) return std::nullopt;
  while (sp != std::string::npos) {
    at = sp + 1;
    sp = line.find(' ', at);
    const std::string tok = line.substr(at, sp == std::string::npos ? std::string::npos : sp - at);
    const auto eq = tok.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    m.fields[tok.substr(0, eq)] = decode_value(tok.substr(eq + 1));
  }
  return m;
}

std::string base64_encode(const unsigned char* d, std::size_t n) {
  std::string o;
  o.reserve((n + 2) / 3 * 4);
  for (std::size_t i = 0; i < n; i += 3) {
    const std::uint32_t v =
        (static_cast<std::uint32_t>(d[i]) << 16) | (i + 1 < n ? d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
    o += kAlphabet[(v >> 18) & 63];
    o += kAlphabet[(v >> 12) & 63];
    o += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    o += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return o;
}

bool base64_decode_append(const std::string& line, std::string& out) {
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : line) {
    if (c == '\r' || c == '\n' || c == ' ' || c == '\t') continue;
    if (c == '=') break;
    const char* p = std::strchr(kAlphabet, c);
    if (!p || c == '\0') return false;
    acc = (acc << 6) | static_cast<std::uint32_t>(p - kAlphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return true;
}

}  // namespace lt::cluster
