// Fuzz target: the bytes of a slot, as a reader meets them, through every
// reading path above shm: the framing reader (one segment or several,
// offsets, traversal limits), the checked typed root and a walk of every
// field, and the dynamic reader (MessageToJson, what echo prints). Also
// the other direction: the same bytes as JSON for JsonToMessage (pub).
// Findings are crashes, sanitizer reports or uncaught exceptions: malformed
// bytes must come back as an error status; and a message the quick bounds
// walk (transport/wire_bounds.h) accepts that Cap'n Proto refuses.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "capnp/schema.h"
#include "tests/fuzz/fuzz_message.capnp.h"
#include "transport/dynamic.h"
#include "transport/framing.h"
#include "transport/wire_bounds.h"

namespace {

using tether::fuzz::Sample;

uint64_t Walk(Sample::Reader s, int depth) {
  uint64_t h = s.getStamp() + s.getLabel().size() + s.getBlob().size();
  for (float v : s.getValues()) h += static_cast<uint64_t>(v != v);
  for (auto j : s.getJoints()) h += j.getName().size() + (j.getPosition() > 0);
  for (auto n : s.getNames()) h += n.size();
  for (bool b : s.getFlags()) h += b;
  for (auto row : s.getMatrix()) {
    for (int16_t x : row) h += static_cast<uint16_t>(x);
  }
  h += static_cast<uint64_t>(s.getMode());
  switch (s.getPayload().which()) {
    case Sample::Payload::NONE: break;
    case Sample::Payload::COUNT: h += s.getPayload().getCount(); break;
    case Sample::Payload::JOINT: h += s.getPayload().getJoint().getName().size(); break;
    case Sample::Payload::TEXT: h += s.getPayload().getText().size(); break;
  }
  if (depth < 8 && s.hasChild()) h += Walk(s.getChild(), depth + 1);
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace tr = tether::transport;
  // A slot is 8-byte aligned; so is this copy (the reader refuses
  // misaligned bytes, which is one more case: offset 4 below).
  std::vector<uint64_t> words(size / 8 + 2);
  std::memcpy(words.data(), data, size);
  const auto* bytes = reinterpret_cast<const std::byte*>(words.data());
  for (size_t shift : {size_t{0}, size_t{4}}) {
    if (shift > size) break;
    std::span<const std::byte> slot(bytes + shift, size - shift);
    tr::ReadOptions options;
    options.traversal_limit_words = 1 << 12;
    try {
      // What typed watchers do: the checked root, every field read.
      tr::SlotMessageReader reader(slot, options);
      // The quick walk's contract (wire_bounds.h): what it accepts, Cap'n
      // Proto's own check accepts.
      if (reader.ok() && reader.segment_count() == 1 &&
          tr::internal::OneSegmentInBounds(reader.segment_words(0),
                                           options.nesting_limit)) {
        tr::SlotMessageReader fresh(slot, options);
        try {
          (void)fresh.getRoot<capnp::AnyPointer>().targetSize();
        } catch (const kj::Exception&) {
          __builtin_trap();
        }
      }
      if (reader.ok()) {
        std::string why;
        volatile uint64_t sink = 0;
        (void)tr::VisitRoot<Sample>(
            reader, [&](Sample::Reader s) { sink = sink + Walk(s, 0); }, &why);
      }
    } catch (...) {
      // VisitRoot catches Cap'n Proto's exceptions; one escaping to here is
      // a finding.
      __builtin_trap();
    }
    (void)tr::MessageToJson(capnp::Schema::from<Sample>(), slot);
  }
  // The same bytes as JSON text for `tether pub`.
  if (size < 4096) {
    const std::string json(reinterpret_cast<const char*>(data), size);
    (void)tr::JsonToMessage(capnp::Schema::from<Sample>(), json);
  }
  return 0;
}
