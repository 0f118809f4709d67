#include "benchmarks/harness/protocol.h"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace tether::bench {

uint64_t NowNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<uint64_t>(ts.tv_nsec);
}

Header ReadHeader(absl::Span<const std::byte> payload) {
  Header h;
  if (payload.size() >= sizeof(h)) std::memcpy(&h, payload.data(), sizeof(h));
  return h;
}

Switches ProcessSwitches() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return Switches{ru.ru_nvcsw, ru.ru_nivcsw};
}

namespace {
Switches Minus(const Switches& a, const Switches& b) {
  return Switches{a.voluntary - b.voluntary, a.involuntary - b.involuntary};
}
inline void CpuRelax() { __builtin_ia32_pause(); }
}  // namespace

void Board::Fail(const std::string& message) {
  int expected = 0;
  if (!failed.compare_exchange_strong(expected, 1)) return;
  std::snprintf(error, sizeof(error), "%s", message.c_str());
}

void Board::SetInfo(const std::string& message) {
  std::snprintf(info, sizeof(info), "%s", message.c_str());
}

absl::StatusOr<Board*> MapBoard(const Session& session) {
  size_t offsets[kMaxCases] = {};
  size_t total = 0;
  for (size_t c = 0; c < session.cases.size(); ++c) {
    offsets[c] = total;
    total += static_cast<size_t>(session.cases[c].samples);
  }
  const size_t bytes = sizeof(Board) + 3 * total * sizeof(int64_t);
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap of a ", bytes, "-byte board failed"));
  }
  Board* board = new (m) Board();
  std::copy(offsets, offsets + kMaxCases, board->sample_offset);
  board->total_samples = total;
  return board;
}

PayloadSource::PayloadSource(uint32_t max_payload) : bytes_(max_payload) {
  for (size_t i = 0; i < bytes_.size(); ++i) {
    bytes_[i] = static_cast<std::byte>((i * 131 + 7) & 0xff);
  }
}

void PayloadSource::Write(absl::Span<std::byte> out, WriteMode mode,
                          const Header& header) {
  if (mode == WriteMode::kFull) {
    std::memcpy(out.data(), bytes_.data(), std::min(out.size(), bytes_.size()));
  }
  std::memcpy(out.data(), &header, std::min(out.size(), sizeof(header)));
}

// --- PingDriver -------------------------------------------------------------

PingDriver::PingDriver(const Session& session, Board* board)
    : cases_(session.cases),
      pongs_(session.pongs),
      budget_ns_(static_cast<uint64_t>(session.case_budget_ms) * 1000000u),
      board_(board),
      source_(session.max_payload()) {}

PingDriver::Outgoing PingDriver::Next() {
  Outgoing o;
  replies_ = 0;
  replied_mask_ = 0;
  if (finished()) {
    o.kind = Kind::kTerminate;
    o.sequence = kTerminate;
    sequence_ = kTerminate;
    t_start_ = NowNs();
    return o;
  }
  const Case& c = cases_[case_];
  const uint64_t warmup = static_cast<uint64_t>(c.warmup);
  const uint64_t total = warmup + static_cast<uint64_t>(c.samples);
  // A slow system ends a case at its time budget, once it has a few samples.
  const bool over_budget =
      budget_ns_ > 0 && next_ > warmup &&
      next_ - warmup >= std::min<uint64_t>(c.samples, kMinSamplesInBudget) &&
      NowNs() - measure_start_ > budget_ns_;
  if (!stop_in_flight_ && next_ < total && !over_budget) {
    o.kind = Kind::kData;
    o.sequence = next_++;
    o.size = c.payload;
    o.mode = c.mode;
    if (o.sequence == warmup) {
      ping_start_ = ProcessSwitches();
      measure_start_ = NowNs();
    }
  } else {
    o.kind = Kind::kStop;
    o.sequence = kStop;
    stop_in_flight_ = true;
  }
  sequence_ = o.sequence;
  t_start_ = NowNs();
  return o;
}

void PingDriver::Write(absl::Span<std::byte> out, const Outgoing& o) {
  source_.Write(out, o.mode, Header{o.sequence, t_start_});
}

void PingDriver::BeforeSend() { t_send_ = NowNs(); }
void PingDriver::AfterSend() { send_cost_ = NowNs() - t_send_; }

bool PingDriver::Reply(int pong, const Header& header) {
  if (header.sequence != sequence_ || pong < 0 || pong >= pongs_) return false;
  const uint32_t bit = 1u << pong;
  if (replied_mask_ & bit) return false;
  replied_mask_ |= bit;
  if (++replies_ < pongs_) return false;
  const uint64_t now = NowNs();
  board_->progress.fetch_add(1, std::memory_order_relaxed);
  if (finished()) return false;
  CaseResult& result = board_->cases[case_];
  const Case& c = cases_[case_];
  if (sequence_ == kStop) {
    result.ping = Minus(ProcessSwitches(), ping_start_);
    // Every data message before the stop was answered and recorded.
    result.samples = static_cast<int32_t>(
        next_ > static_cast<uint64_t>(c.warmup) ? next_ - c.warmup : 0);
    result.done.store(1, std::memory_order_release);
    ++case_;
    next_ = 0;
    stop_in_flight_ = false;
    return true;
  }
  if (sequence_ >= static_cast<uint64_t>(c.warmup)) {
    const size_t i = sequence_ - static_cast<uint64_t>(c.warmup);
    uint64_t last = 0;
    for (int k = 0; k < pongs_; ++k) {
      last = std::max(last,
                      board_->pong_recv_ns[k].load(std::memory_order_acquire));
    }
    board_->rtt(case_)[i] = static_cast<int64_t>(now - t_start_);
    board_->oneway(case_)[i] =
        last >= t_start_ ? static_cast<int64_t>(last - t_start_) : -1;
    board_->send_cost(case_)[i] = static_cast<int64_t>(send_cost_);
  }
  return true;
}

// --- PongDriver -------------------------------------------------------------

PongDriver::PongDriver(const Session& session, Board* board, int index)
    : cases_(session.cases),
      board_(board),
      index_(index),
      source_(session.max_payload()) {}

PongDriver::Action PongDriver::OnMessage(absl::Span<const std::byte> payload) {
  const uint64_t now = NowNs();
  const Header h = ReadHeader(payload);
  Action a;
  if (h.sequence == kTerminate) {
    a.kind = Kind::kExit;
    return a;
  }
  if (case_ >= static_cast<int>(cases_.size())) return a;  // kIgnore
  const Case& c = cases_[case_];
  a.kind = Kind::kReply;
  a.sequence = h.sequence;
  if (h.sequence == kStop) {
    board_->cases[case_].pong[index_] = Minus(ProcessSwitches(), start_);
    ++case_;
    return a;  // kMinPayload, touch16
  }
  board_->pong_recv_ns[index_].store(now, std::memory_order_release);
  if (h.sequence == static_cast<uint64_t>(c.warmup)) start_ = ProcessSwitches();
  a.size = c.payload;
  a.mode = c.mode;
  return a;
}

void PongDriver::Write(absl::Span<std::byte> out, const Action& a) {
  source_.Write(out, a.mode, Header{a.sequence, NowNs()});
}

// --- throughput -------------------------------------------------------------

RateSender::RateSender(const Session& session, Board* board)
    : session_(session), board_(board) {}

bool RateSender::RunPhase(int phase, double rate, SendFn send,
                          PhaseResult* r) {
  const int64_t n = std::max<int64_t>(
      200, static_cast<int64_t>(rate * session_.phase_ms / 1000.0));
  const uint32_t size = session_.throughput_payload;
  const double period_ns = 1e9 / rate;
  const Switches sw0 = ProcessSwitches();
  const uint64_t t0 = NowNs();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t target = t0 + static_cast<uint64_t>(i * period_ns);
    uint64_t now = NowNs();
    if (target > now + 60000) {  // far ahead: sleep, then spin the rest
      const uint64_t wake = target - 30000;
      timespec ts{static_cast<time_t>(wake / 1000000000u),
                  static_cast<long>(wake % 1000000000u)};
      ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    }
    while (NowNs() < target) CpuRelax();
    if (!send(Header{static_cast<uint64_t>(i), NowNs()}, size)) {
      ++r->send_failures;
    }
  }
  const uint64_t t1 = NowNs();
  r->publisher = Minus(ProcessSwitches(), sw0);
  r->target_rate = rate;
  r->sent = n;
  r->achieved_rate = n / std::max(1e-9, (t1 - t0) / 1e9);
  // Stop (carrying the phase number) until the subscriber has reported.
  const uint64_t deadline = NowNs() + 5000000000u;
  while (board_->phases_reported.load(std::memory_order_acquire) <= phase) {
    if (NowNs() > deadline) {
      r->received = -1;
      return false;
    }
    (void)send(Header{kStop, static_cast<uint64_t>(phase)}, kMinPayload);
    for (int i = 0; i < 20 && board_->phases_reported.load(
                                  std::memory_order_acquire) <= phase;
         ++i) {
      timespec ts{0, 1000000};
      ::nanosleep(&ts, nullptr);
    }
  }
  const PhaseResult& got = board_->phases[phase];
  r->received = got.received;
  r->lost = got.lost;
  r->subscriber = got.subscriber;
  r->ok = r->send_failures == 0 && r->received == n && r->lost == 0 &&
          r->achieved_rate >= 0.95 * rate;
  return r->ok;
}

absl::Status RateSender::Run(SendFn send) {
  double rate = session_.start_rate;
  double good = 0;
  double bad = 0;
  int bisections = 0;
  bool retrying = false;
  for (int phase = 0; phase < kMaxPhases; ++phase) {
    PhaseResult r;
    r.retry = retrying;
    const bool ok = RunPhase(phase, rate, send, &r);
    board_->phases[phase] = r;  // RunPhase copied the subscriber's counts in
    board_->phase_count = phase + 1;
    board_->progress.fetch_add(1, std::memory_order_relaxed);
    if (r.received < 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          "throughput phase at ", rate,
          " msg/s: the subscriber never reported (stop message lost 5 s)"));
    }
    // One hiccup of a shared machine (a stall longer than the queue) should
    // not decide the rate: a failed rate is tried once more.
    if (!ok && !retrying) {
      retrying = true;
      continue;
    }
    retrying = false;
    if (ok) {
      good = std::max(good, rate);
    } else {
      bad = bad == 0 ? rate : std::min(bad, rate);
    }
    if (bad == 0) {
      if (rate >= session_.max_rate) break;
      rate = std::min(rate * 2, session_.max_rate);
      continue;
    }
    if (good == 0 || bisections >= 3 || bad / good < 1.15) break;
    rate = std::sqrt(good * bad);
    ++bisections;
  }
  return absl::OkStatus();
}

bool RateCounter::OnMessage(absl::Span<const std::byte> payload) {
  const Header h = ReadHeader(payload);
  if (h.sequence == kTerminate) return true;
  if (h.sequence == kStop) {
    const int phase = static_cast<int>(h.send_ns);
    if (phase < 0 || phase >= kMaxPhases ||
        phase < board_->phases_reported.load(std::memory_order_acquire)) {
      return false;  // a repeated stop
    }
    PhaseResult& r = board_->phases[phase];
    r.received = received_;
    r.lost = lost_;
    r.subscriber = started_ ? Minus(ProcessSwitches(), start_) : Switches{};
    board_->phases_reported.store(phase + 1, std::memory_order_release);
    received_ = lost_ = 0;
    next_ = 0;
    started_ = false;
    return false;
  }
  if (!started_) {
    start_ = ProcessSwitches();
    started_ = true;
  }
  ++received_;
  if (h.sequence >= next_) {
    lost_ += static_cast<int64_t>(h.sequence - next_);
    next_ = h.sequence + 1;
  } else if (lost_ > 0) {
    --lost_;  // late, not lost
  }
  return false;
}

}  // namespace tether::bench
