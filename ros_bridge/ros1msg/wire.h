// ros_bridge/ros1msg: reading and writing the ROS 1 serialization (little
// endian primitives; string = uint32 length + bytes; variable array = uint32
// count + elements; fixed array = elements; time/duration = two 32-bit
// ints; nested messages inline). Internal to ros1msg's decoders.
#ifndef TETHER_ROS_BRIDGE_ROS1MSG_WIRE_H_
#define TETHER_ROS_BRIDGE_ROS1MSG_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <bit>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ros_bridge/ros1msg/definition.h"

namespace tether::ros1msg::internal {

static_assert(std::endian::native == std::endian::little,
              "the ROS 1 serialization is little endian; so is this code");

// Bounds-checked cursor over untrusted bytes: every read fails (returns
// false) instead of reading past the end. No allocation. One thread.
class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> data) : data_(data) {}

  template <typename T>
  bool Scalar(T* out) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (data_.size() - offset_ < sizeof(T)) return false;
    std::memcpy(out, data_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return true;
  }
  // An array or string length whose elements take at least `min_size` bytes
  // each: fails if they cannot fit in what is left (a corrupt count never
  // makes the caller allocate gigabytes).
  bool Length(uint32_t* n, size_t min_size) {
    if (!Scalar(n)) return false;
    return min_size == 0 || uint64_t{*n} * min_size <= remaining();
  }
  bool Bytes(size_t n, std::span<const uint8_t>* out) {
    if (remaining() < n) return false;
    *out = data_.subspan(offset_, n);
    offset_ += n;
    return true;
  }
  size_t remaining() const { return data_.size() - offset_; }
  size_t offset() const { return offset_; }

 private:
  std::span<const uint8_t> data_;
  size_t offset_ = 0;
};

// Appends the ROS serialization to a byte vector. Allocates as it grows.
class WireWriter {
 public:
  explicit WireWriter(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void Scalar(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = out_->size();
    out_->resize(at + sizeof(T));
    std::memcpy(out_->data() + at, &v, sizeof(T));
  }
  void Bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    out_->insert(out_->end(), p, p + n);
  }

 private:
  std::vector<uint8_t>* out_;
};

// The smallest serialized size of one element of `f`'s type (its fixed
// size, 4 for strings, a lower bound for messages). Used to bound counts.
size_t MinSerializedSize(const Field& f);
size_t MinSerializedSize(const MessageSpec& spec);

}  // namespace tether::ros1msg::internal

#endif  // TETHER_ROS_BRIDGE_ROS1MSG_WIRE_H_
