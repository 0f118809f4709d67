// log: one part of `tether log check` (log_check.h), apart for its size:
// the summary's Summary Offset records checked against the records they
// claim to cover. Any thread; allocates; reads the file.
#ifndef TETHER_LOG_LOG_CHECK_SUMMARY_H_
#define TETHER_LOG_LOG_CHECK_SUMMARY_H_

#include <cstdint>

#include "log/log_check.h"
#include "log/mcap_scanner.h"

namespace tether::log {

// Each Summary Offset of the summary starting at `summary_start` must lie
// inside the summary and cover exactly a run of records of its opcode;
// problems (with the group's offset) and a note when there are none go to
// `report`.
void CheckSummaryOffsets(const McapFile& file, uint64_t summary_start,
                         CheckReport* report);

}  // namespace tether::log

#endif  // TETHER_LOG_LOG_CHECK_SUMMARY_H_
