#include "ros_bridge/outbox.h"

#include <chrono>
#include <utility>

namespace tether::ros_bridge {

int Outbox::AddTopic() {
  std::lock_guard<std::mutex> lock(mu_);
  topics_.push_back(std::make_unique<Topic>());
  return static_cast<int>(topics_.size() - 1);
}

std::unique_ptr<OutboxItem> Outbox::Acquire(int topic) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Topic& t = *topics_.at(topic);
    if (!t.free.empty()) {
      std::unique_ptr<OutboxItem> item = std::move(t.free.back());
      t.free.pop_back();
      return item;
    }
  }
  return std::make_unique<OutboxItem>();
}

void Outbox::Push(int topic, std::unique_ptr<OutboxItem> item) {
  std::unique_ptr<OutboxItem> dropped;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    Topic& t = *topics_.at(topic);
    if (t.queue.size() >= depth_) {
      dropped = std::move(t.queue.front());
      t.queue.pop_front();
      ++t.dropped;
    }
    t.queue.push_back(std::move(item));
    if (dropped != nullptr && t.free.size() < depth_) {
      t.free.push_back(std::move(dropped));
    }
  }
  ready_.notify_one();
}

std::unique_ptr<OutboxItem> Outbox::Pop(int timeout_ms, int* topic) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  for (;;) {
    if (closed_) return nullptr;
    const size_t n = topics_.size();
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (next_ + k) % n;
      Topic& t = *topics_[i];
      if (t.queue.empty()) continue;
      std::unique_ptr<OutboxItem> item = std::move(t.queue.front());
      t.queue.pop_front();
      next_ = i + 1;
      *topic = static_cast<int>(i);
      return item;
    }
    if (timed_out) return nullptr;
    // After a timeout, one more look (a Push() may have raced it).
    timed_out =
        ready_.wait_until(lock, deadline) == std::cv_status::timeout;
  }
}

void Outbox::Recycle(int topic, std::unique_ptr<OutboxItem> item) {
  std::lock_guard<std::mutex> lock(mu_);
  Topic& t = *topics_.at(topic);
  if (t.free.size() < depth_) t.free.push_back(std::move(item));
}

void Outbox::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  ready_.notify_all();
}

uint64_t Outbox::dropped(int topic) const {
  std::lock_guard<std::mutex> lock(mu_);
  return topics_.at(topic)->dropped;
}

size_t Outbox::queued(int topic) const {
  std::lock_guard<std::mutex> lock(mu_);
  return topics_.at(topic)->queue.size();
}

}  // namespace tether::ros_bridge
