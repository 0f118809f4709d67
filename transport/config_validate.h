// transport internal: the semantic rules of a merged stack config — channel
// and node fields (names, types, sizes, depths, modes, scheduling, CPUs,
// restart, env), and the graph (reads/writes name declared channels, enough
// maxPublishers for the nodes writing a channel, startAfter names and
// cycles). Used by the loader (config.cc) after the JSON passed the schema
// check; it resolves each channel's queueDepth in place.
#ifndef TETHER_TRANSPORT_CONFIG_VALIDATE_H_
#define TETHER_TRANSPORT_CONFIG_VALIDATE_H_

#include <vector>

#include "transport/config.capnp.h"
#include "transport/config.h"
#include "transport/config_report.h"

namespace tether::transport::internal {

// Where each merged entry came from: its origin and source-file index.
struct MergedOrigins {
  const std::vector<ConfigOrigin>* channels = nullptr;
  const std::vector<ConfigOrigin>* nodes = nullptr;
  const std::vector<int>* channel_files = nullptr;
  const std::vector<int>* node_files = nullptr;
};

// Adds every problem of `stack` to `problems` (errors and warnings), and
// sets each valid channel's queueDepth to the depth in use. Setup only.
void ValidateStack(config::Stack::Builder stack, const MergedOrigins& origins,
                   const KnownTypes& types, Problems& problems);

}  // namespace tether::transport::internal

#endif  // TETHER_TRANSPORT_CONFIG_VALIDATE_H_
