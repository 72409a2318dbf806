#include "user/text/numbers.h"

#include <fmt/format.h>

namespace lt {

std::string fixed(double v, int decimals) {
  return fmt::format("{:.{}f}", v, decimals);
}

std::string signed_fixed(double v, int decimals) {
  return fmt::format("{:+.{}f}", v, decimals);
}

std::string percent(double v, int decimals) {
  return fmt::format("{:.{}f}%", v, decimals);
}

namespace {

// "1234567.5" -> "1,234,567.5": commas in the integer part of a non-negative number.
std::string group_thousands(const std::string& s) {
  const std::size_t dot = s.find('.');
  const std::size_t int_end = dot == std::string::npos ? s.size() : dot;
  std::string out;
  for (std::size_t i = 0; i < int_end; ++i) {
    if (i > 0 && (int_end - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out + s.substr(int_end);
}

}  // namespace

std::string grouped(std::uint64_t v) {
  return group_thousands(std::to_string(v));
}

std::string grouped_fixed(double v, int decimals) {
  return group_thousands(fixed(v, decimals));
}

std::string ns_as_ms(double ns, int decimals) {
  return fixed(ns / 1e6, decimals);
}

std::string ns_as_s(double ns, int decimals) {
  return fixed(ns / 1e9, decimals);
}

std::string hex(std::uint64_t v, int digits, HexCase letters) {
  return letters == HexCase::upper ? fmt::format("{:0{}X}", v, digits) : fmt::format("{:0{}x}", v, digits);
}

}  // namespace lt
