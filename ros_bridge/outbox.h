// ros_bridge: the hand-over from tether-side readers to the thread that
// publishes into ROS. Each topic has a bounded queue; a full queue drops its
// oldest message and counts it, so a slow or blocked ROS side never makes a
// tether-side reader wait (and fall behind its channel). ROS-independent.
#ifndef TETHER_ROS_BRIDGE_OUTBOX_H_
#define TETHER_ROS_BRIDGE_OUTBOX_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tether::ros_bridge {

// One message bound for ROS.
struct OutboxItem {
  std::vector<uint8_t> data;  // ROS serialization
  std::string type;
  std::string md5sum;
  std::string definition;
  bool latching = false;
  // Where the message came from: its origin tag and its envelope's origin
  // graph (0: none), so the publisher thread can check them once more
  // against the graph's id (a message taken in before the bridge knew it).
  uint64_t origin = 0;
  uint64_t origin_graph = 0;
};

// Thread-safe. Push() and Pop() hold one mutex only to move an item in or
// out (never while copying message bytes), so a reader's Push() waits at
// most for another short critical section, never for ROS.
class Outbox {
 public:
  explicit Outbox(size_t depth_per_topic) : depth_(depth_per_topic) {}

  // A new topic queue; returns its index. Any thread.
  int AddTopic();

  // An item to fill for `topic` (a recycled one when there is one, so a
  // steady stream reuses its buffers). Any thread.
  std::unique_ptr<OutboxItem> Acquire(int topic);
  // Queues `item`; if the queue was full the oldest item is dropped and
  // counted. Any thread; never blocks on the consumer.
  void Push(int topic, std::unique_ptr<OutboxItem> item);

  // The consumer: the next item of any topic (round robin), waiting until
  // one is there or `timeout_ms` passed (nullptr then) or Close().
  std::unique_ptr<OutboxItem> Pop(int timeout_ms, int* topic);
  // Gives a published item's buffers back for reuse.
  void Recycle(int topic, std::unique_ptr<OutboxItem> item);

  // Pop() returns nullptr at once from now on.
  void Close();

  uint64_t dropped(int topic) const;
  size_t queued(int topic) const;

 private:
  struct Topic {
    std::deque<std::unique_ptr<OutboxItem>> queue;
    std::vector<std::unique_ptr<OutboxItem>> free;
    uint64_t dropped = 0;
  };
  const size_t depth_;
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::vector<std::unique_ptr<Topic>> topics_;
  size_t next_ = 0;  // round-robin start
  bool closed_ = false;
};

}  // namespace tether::ros_bridge

#endif  // TETHER_ROS_BRIDGE_OUTBOX_H_
