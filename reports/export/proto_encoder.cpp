#include "reports/export/proto_encoder.h"

namespace lt {

void append_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void ProtoMessage::tag(std::uint32_t field, unsigned wire_type) {
  append_varint(data_, (static_cast<std::uint64_t>(field) << 3) | wire_type);
}

void ProtoMessage::varint(std::uint32_t field, std::uint64_t v) {
  tag(field, 0);
  append_varint(data_, v);
}

void ProtoMessage::fixed64(std::uint32_t field, std::uint64_t v) {
  tag(field, 1);
  for (int i = 0; i < 8; ++i) data_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void ProtoMessage::bytes(std::uint32_t field, std::string_view v) {
  tag(field, 2);
  append_varint(data_, v.size());
  data_.append(v);
}

}  // namespace lt
