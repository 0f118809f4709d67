// tools: `tether list` as a library — the channels under a root, with their
// type, size, depth, traffic and registered endpoints, as a table or JSON.
#ifndef TETHER_TOOLS_LIST_H_
#define TETHER_TOOLS_LIST_H_

#include <string>
#include <vector>

#include "transport/channel_handle.h"

namespace tether::tools {

// A fixed-width table, one channel per line; channels that cannot be read
// show their error. Allocates; not RT-safe.
std::string FormatChannelTable(
    const std::vector<transport::ChannelSummary>& channels);

// One JSON object {"channels": [...]}.
std::string FormatChannelJson(
    const std::vector<transport::ChannelSummary>& channels);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_LIST_H_
