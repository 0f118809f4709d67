// log: `tether log check` — verifies a log end to end: every record frames
// and parses, every chunk's CRC and sizes, every message index against the
// chunk it indexes, the Data End CRC, the summary's CRC, its schema and
// channel copies, chunk indexes, statistics and summary offsets against
// what the data section really holds, every message of a Cap'n Proto
// channel decoded with its schema (as typed readers, replay and `tether log
// cat` decode it: a message that does not decode is a problem, counted per
// channel), and tether's own records (a context record after every
// message, decodable loss records, tether metadata on every channel).
//
// Threading: any thread; reads the whole file. Not RT-safe.
#ifndef TETHER_LOG_LOG_CHECK_H_
#define TETHER_LOG_LOG_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "log/mcap_reader.h"

namespace tether::log {

struct CheckReport {
  // One line per kind of check that found nothing wrong, e.g.
  // "chunk CRCs: 128 chunks".
  std::vector<std::string> passed;
  // Everything wrong, each naming the file offset.
  std::vector<McapProblem> problems;
  // Things that are valid MCAP but unusual for a tether log (a channel
  // without tether metadata, messages without context).
  std::vector<std::string> notes;
  uint64_t messages = 0;
  uint64_t chunks = 0;
  // Messages that do not decode, and the problems (one per channel) that
  // say so: damage to the messages themselves, which recovering the file
  // does not mend.
  uint64_t undecodable_messages = 0;
  size_t undecodable_problems = 0;
  bool ok() const { return problems.empty(); }
};

// Fails only when the file cannot be opened as MCAP at all.
absl::StatusOr<CheckReport> CheckLog(const std::string& path);

}  // namespace tether::log

#endif  // TETHER_LOG_LOG_CHECK_H_
