#include "user/watch/exception_line.h"

#include "user/text/utf8_text.h"

namespace lt {

std::string last_exception(std::string_view tail) {
  constexpr std::string_view kHead = "Traceback (most recent call last):";
  const std::size_t head = tail.rfind(kHead);
  if (head == std::string_view::npos) return "";
  for (std::size_t at = tail.find('\n', head); at != std::string_view::npos && at + 1 < tail.size();) {
    const std::size_t begin = at + 1;
    const std::size_t end = std::min(tail.find('\n', begin), tail.size());
    const std::string_view line = tail.substr(begin, end - begin);
    at = end < tail.size() ? end : std::string_view::npos;
    if (line.empty() || line.front() == ' ' || line.front() == '\t') continue;  // a frame, its source line
    // The exception line: only when it is whole (a newline after it), and
    // not the caret line's like ("^^^^" is indented anyway).
    if (end == tail.size()) return "";
    std::string text = utf8_text(std::string(line));
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.size() > kMaxExceptionLine) {
      std::size_t cut = kMaxExceptionLine;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
      text = text.substr(0, cut) + "...";
    }
    return text;
  }
  return "";
}

}  // namespace lt
