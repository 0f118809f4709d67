#include "log/log_check_summary.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "log/mcap_format.h"

namespace tether::log {

void CheckSummaryOffsets(const McapFile& file, uint64_t summary_start,
                         CheckReport* report) {
  const uint64_t footer_at = file.size() - mcap::kMagicSize -
                             mcap::kFooterRecordSize;
  std::vector<std::byte> bytes;
  // Unreadable: the summary's other checks say so.
  if (!file.ReadAt(summary_start, footer_at - summary_start, &bytes).ok()) {
    return;
  }
  uint64_t pos = 0;
  mcap::RecordView r;
  std::vector<mcap::SummaryOffset> offsets;
  while (mcap::SplitRecord(bytes, &pos, &r) == mcap::SplitStatus::kOk) {
    if (r.opcode == static_cast<uint8_t>(mcap::Opcode::kSummaryOffset)) {
      if (auto so = mcap::ParseSummaryOffset(r.content); so.ok()) {
        offsets.push_back(*so);
      }
    }
  }
  if (offsets.empty()) report->notes.push_back("no summary offsets");
  for (const mcap::SummaryOffset& so : offsets) {
    if (so.group_start < summary_start ||
        so.group_start + so.group_length > footer_at) {
      report->problems.push_back(
          {so.group_start, "summary offset points outside the summary"});
      continue;
    }
    uint64_t p = so.group_start - summary_start;
    const uint64_t end = p + so.group_length;
    bool good = true;
    while (p < end) {
      if (mcap::SplitRecord(bytes, &p, &r) != mcap::SplitStatus::kOk ||
          r.opcode != so.group_opcode || p > end) {
        good = false;
        break;
      }
    }
    if (!good) {
      report->problems.push_back(
          {so.group_start,
           absl::StrCat("summary offset for ",
                        mcap::OpcodeName(so.group_opcode),
                        " records does not cover exactly such records")});
    }
  }
}

}  // namespace tether::log
