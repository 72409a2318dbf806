// Names reach us as bytes the traced program holds, and not all of them are
// UTF-8: a CPython str may hold lone surrogates (surrogateescape makes them
// from file names and argv), C names, kernel names and command lines are
// raw bytes.  Our decoders keep a lone surrogate as its 3-byte generalized
// UTF-8 form (ED A0..BF xx, as "surrogatepass" writes it) so the target's
// string can be reproduced; every writer turns the bytes into valid output
// here (docs/design-actions.md, "Names that are not UTF-8"):
//   text, HTML:  valid UTF-8 as is; a lone surrogate U+DCFF as `\udcff`; any
//                other byte that is not UTF-8 as `\xNN` (Python's
//                backslashreplace).
//   JSON:        json_string() (json_escape.h): `\udcff` for the surrogate,
//                `\udcNN` for a stray byte NN (surrogateescape's code point:
//                json.load gives the str, .encode("utf-8", "surrogateescape")
//                the bytes).
#pragma once
#include <cstddef>
#include <cstdint>
#include <streambuf>
#include <string>
#include <string_view>

namespace lt {

// One step of decoding generalized UTF-8.
struct Utf8Char {
  enum Kind : std::uint8_t {
    scalar,     // a Unicode scalar value in valid UTF-8 (`len` bytes)
    surrogate,  // U+D800..U+DFFF as ED A0..BF 80..BF (3 bytes)
    invalid,    // p[0] starts nothing valid here (1 byte)
    truncated,  // p[0..n) could still start a character: more bytes needed
  } kind;
  std::uint8_t len;
  std::uint32_t cp;  // scalar, surrogate: the code point; else the byte
};
// The character at p[0..n), n >= 1.
Utf8Char next_utf8(const unsigned char* p, std::size_t n);

// `bytes` as valid UTF-8 text, escaped as above.  Valid UTF-8 comes back
// unchanged; the result is again unchanged by utf8_text.
std::string utf8_text(std::string_view bytes);
// Appends utf8_text(p[0..n)) to `out`.  With `final` false, a tail that may
// continue in bytes not seen yet is left undone: returns its length.
std::size_t append_utf8_text(std::string& out, const unsigned char* p, std::size_t n, bool final);

// A streambuf that writes utf8_text of what passes through to another one,
// holding a character split across writes until its end arrives (finish()
// or the destructor writes what is still held as escaped bytes).
class Utf8TextBuf : public std::streambuf {
 public:
  explicit Utf8TextBuf(std::streambuf* to) : to_(to) {}
  ~Utf8TextBuf() override { finish(); }
  Utf8TextBuf(const Utf8TextBuf&) = delete;
  Utf8TextBuf& operator=(const Utf8TextBuf&) = delete;
  void finish();

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override { return to_->pubsync(); }

 private:
  std::streambuf* to_;
  std::string held_;  // at most 3 bytes: the start of a character
};

}  // namespace lt
