// log: `tether log recover IN OUT` — rewrites a damaged or unfinished log
// (a writer killed before its summary, a truncated copy, corrupt chunks) as
// a complete, indexed file: every message of every intact chunk with its
// context record, the channels and schemas, the metadata, and a
// tether.summary computed from what was recovered (loss records included).
// What could not be recovered is reported with its file offsets and also
// written into the new file's summary metadata.
//
// Threading: any thread; reads IN, writes OUT. Not RT-safe.
#ifndef TETHER_LOG_LOG_RECOVER_H_
#define TETHER_LOG_LOG_RECOVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "log/mcap_reader.h"
#include "log/mcap_writer.h"

namespace tether::log {

struct RecoverReport {
  uint64_t messages = 0;
  uint64_t channels = 0;
  uint64_t chunks_read = 0;
  // Messages read intact but left out: their channel's record was lost
  // (they cannot be decoded or replayed without it).
  uint64_t orphans = 0;
  // Damage found in IN (each with its offset).
  std::vector<McapProblem> problems;
  bool input_was_complete = false;  // IN had an intact summary already
};

// Fails if IN cannot be read as MCAP at all, or OUT cannot be written
// (AlreadyExists unless options.overwrite; a full disk). A failure after
// OUT was created removes it again: no partial OUT is left behind.
absl::StatusOr<RecoverReport> RecoverLog(const std::string& in,
                                         const std::string& out,
                                         const McapWriterOptions& options);

}  // namespace tether::log

#endif  // TETHER_LOG_LOG_RECOVER_H_
