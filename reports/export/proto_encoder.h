// Protocol Buffers wire format, written by hand: the few field kinds the
// Perfetto writer needs (varints, fixed64, length-delimited bytes and
// nested messages), so the trace needs no libprotobuf.
// https://protobuf.dev/programming-guides/encoding/
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace lt {

// `v` as a base-128 varint, low groups first (1 to 10 bytes).
void append_varint(std::string& out, std::uint64_t v);

// One message being built: fields appended in the order given.  A nested
// message is built on its own and appended whole (its length first), so
// each is small: the writer builds one TracePacket at a time.
class ProtoMessage {
 public:
  // Wire type 0: uint32/64, bool, enum; int32/int64 as two's complement
  // (a negative value takes 10 bytes, as protobuf's own encoders write it).
  void varint(std::uint32_t field, std::uint64_t v);
  void int64(std::uint32_t field, std::int64_t v) { varint(field, static_cast<std::uint64_t>(v)); }
  // Wire type 1: fixed64 (Perfetto's flow ids).
  void fixed64(std::uint32_t field, std::uint64_t v);
  // Wire type 2: string, bytes, nested message.
  void bytes(std::uint32_t field, std::string_view v);
  void message(std::uint32_t field, const ProtoMessage& m) { bytes(field, m.data_); }

  const std::string& data() const { return data_; }
  bool empty() const { return data_.empty(); }
  void clear() { data_.clear(); }

 private:
  void tag(std::uint32_t field, unsigned wire_type);
  std::string data_;
};

}  // namespace lt
