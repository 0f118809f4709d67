#include "net/channel_stats.h"

#include <algorithm>
#include <cmath>

namespace tether::net {

SequenceTracker::Result SequenceTracker::Observe(uint64_t stream,
                                                 uint64_t seq,
                                                 uint64_t lost_total) {
  auto [it, inserted] = last_.try_emplace(stream, Last{seq, lost_total});
  if (inserted) return {Verdict::kFirst, 0, 0};
  Last& last = it->second;
  if (seq <= last.seq) return {Verdict::kOld, 0, 0};
  const uint64_t lost = seq - last.seq - 1;
  const uint64_t at_sender =
      lost_total > last.lost_total ? lost_total - last.lost_total : 0;
  last.seq = seq;
  last.lost_total = std::max(last.lost_total, lost_total);
  return {lost == 0 ? Verdict::kNext : Verdict::kGap, lost, at_sender};
}

LatencyWindow::LatencyWindow() { samples_.reserve(kCapacity); }

void LatencyWindow::Add(int64_t ns) {
  std::lock_guard lock(mu_);
  ++seen_;
  if (seen_ == 1 || ns > max_) max_ = ns;
  if (samples_.size() < kCapacity) {
    samples_.push_back(ns);
    return;
  }
  // Reservoir sampling: keep each of the `seen_` samples with equal odds.
  const uint64_t j = std::uniform_int_distribution<uint64_t>(0, seen_ - 1)(rng_);
  if (j < kCapacity) samples_[j] = ns;
}

LatencySummary LatencyWindow::Take() {
  std::lock_guard lock(mu_);
  LatencySummary s;
  s.samples = seen_;
  if (!samples_.empty()) {
    std::sort(samples_.begin(), samples_.end());
    auto at = [&](double p) {
      size_t i = static_cast<size_t>(std::ceil(p * samples_.size()));
      i = std::clamp<size_t>(i, 1, samples_.size()) - 1;
      return samples_[i] / 1000.0;
    };
    s.p50_us = at(0.50);
    s.p99_us = at(0.99);
    s.max_us = max_ / 1000.0;
  }
  samples_.clear();
  seen_ = 0;
  max_ = 0;
  return s;
}

}  // namespace tether::net
