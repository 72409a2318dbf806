#include "user/cli/terminal_escape.h"

#include <unistd.h>

#include <iostream>
#include <streambuf>

#include "user/text/utf8_text.h"

namespace lt {

namespace {
void append_hex(std::string& out, const char* prefix, unsigned v, int digits) {
  static const char hex[] = "0123456789abcdef";
  out += prefix;
  for (int d = digits - 1; d >= 0; --d) out.push_back(hex[(v >> (4 * d)) & 0xF]);
}

// Escapes byte by byte; the only multi-byte case is C1 (UTF-8 C2 80..C2 9F),
// so a lead byte C2 is held until the next one arrives.
class Escaper {
 public:
  void put(unsigned char c, std::string& out) {
    if (held_c2_) {
      held_c2_ = false;
      if (c >= 0x80 && c <= 0x9F) {
        append_hex(out, "\\u", c, 4);
        return;
      }
      out.push_back(static_cast<char>(0xC2));
    }
    if (c == 0xC2) {
      held_c2_ = true;
    } else if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) {
      append_hex(out, "\\x", c, 2);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  void finish(std::string& out) {
    if (held_c2_) out.push_back(static_cast<char>(0xC2));
    held_c2_ = false;
  }

 private:
  bool held_c2_ = false;
};

// A streambuf in front of the terminal's: escapes what passes through.
class EscapingBuf : public std::streambuf {
 public:
  explicit EscapingBuf(std::streambuf* to) : to_(to) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::string out;
    out.reserve(static_cast<std::size_t>(n));
    for (std::streamsize i = 0; i < n; ++i) esc_.put(static_cast<unsigned char>(s[i]), out);
    const auto size = static_cast<std::streamsize>(out.size());
    return to_->sputn(out.data(), size) == size ? n : 0;
  }
  int sync() override {
    // A lead byte held at a flush is written when its next byte comes; a
    // UTF-8 character is never split across a flush of ours.
    return to_->pubsync();
  }

 private:
  std::streambuf* to_;
  Escaper esc_;
};
}  // namespace

std::string escape_terminal_controls(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  Escaper esc;
  for (unsigned char c : text) esc.put(c, out);
  esc.finish(out);
  return out;
}

void escape_controls_on_terminals() {
  // Never freed: the streams flush at exit, after any static would be gone.
  if (isatty(STDOUT_FILENO)) std::cout.rdbuf(new EscapingBuf(std::cout.rdbuf()));
  if (isatty(STDERR_FILENO)) std::cerr.rdbuf(new EscapingBuf(std::cerr.rdbuf()));
}

void valid_utf8_on_std_streams() {
  // In front of the terminal escaper, which expects valid UTF-8.  Never
  // freed, as above: a reports' last line ends in a newline, so nothing is
  // held at exit.
  std::cout.rdbuf(new Utf8TextBuf(std::cout.rdbuf()));
  std::cerr.rdbuf(new Utf8TextBuf(std::cerr.rdbuf()));
}

}  // namespace lt
