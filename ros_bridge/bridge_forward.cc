// ros_bridge: the bridge's forwarding, one direction each — a ROS message
// into a tether slot (roscpp's callback threads), a tether message into the
// outbox (watcher threads), the outbox into ROS (the publisher thread)
// (bridge_impl.h).
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "absl/strings/str_cat.h"
#include "capnp/dynamic.h"
#include "kj/exception.h"
#include "ros/ros.h"
#include "ros_bridge/bridge_impl.h"
#include "ros_bridge/outbox.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "ros_bridge/ros1msg/typed.h"
#include "shm/channel.h"
#include "topic_tools/shape_shifter.h"
#include "transport/framing.h"
#include "transport/raw_endpoints.h"

namespace tether::ros_bridge {

void Bridge::Impl::OnRosMessage(
    RosToTether* r,
    const ros::MessageEvent<topic_tools::ShapeShifter const>& event) {
  const std::string& callerid = event.getPublisherName();
  if (callerid == link_->node() || FromSameDomainBridge(callerid)) {
    r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const topic_tools::ShapeShifter& m = *event.getConstMessage();
  const ros::M_string& header = event.getConnectionHeader();
  auto latching_it = header.find("latching");
  const bool latching = latching_it != header.end() && latching_it->second == "1";
  const int64_t receive_ns = static_cast<int64_t>(event.getReceiptTime().toNSec());
  const uint32_t size = m.size();
  // One id for the envelope's origin graph and the slot's origin tag.
  const uint64_t graph = graph_.load(std::memory_order_relaxed);

  if (latching || r->typed != nullptr) {
    r->scratch.resize(size);
    ros::serialization::OStream os(r->scratch.data(), size);
    m.write(os);
  }
  if (latching) {
    // A latched publisher sends its message again on every new connection
    // (e.g. after we subscribed again to a restarted master): not news.
    std::vector<uint8_t>& last = r->last_latched[callerid];
    if (last == r->scratch) {
      r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    last = r->scratch;
  }

  std::span<std::byte> loan = r->publisher->Loan();
  if (loan.empty()) {
    r->counters.dropped_full.fetch_add(1, std::memory_order_relaxed);
    (void)r->publisher->CountFailure(transport::PublishStatus::kNoLoan);
    return;
  }
  transport::FinishResult finish;
  if (r->typed != nullptr) {
    if (m.getMD5Sum() != r->typed->md5sum) {
      r->counters.malformed.fetch_add(1, std::memory_order_relaxed);
      r->error.Set(absl::StrCat(callerid, " publishes ", m.getDataType(),
                                " (md5 ", m.getMD5Sum(), ") on ", r->ros_topic,
                                "; the channel is typed ", r->typed->ros_type,
                                " (md5 ", r->typed->md5sum, ")"));
      return;
    }
    transport::SlotMessageBuilder builder(r->arena.get(), loan, r->channel);
    absl::Status s;
    try {
      capnp::DynamicStruct::Builder root =
          builder.initRoot<capnp::DynamicStruct>(r->typed->schema);
      s = ros1msg::RosToCapnp(*r->typed->parsed, r->scratch, root);
    } catch (const kj::Exception& e) {
      s = absl::InternalError(e.getDescription().cStr());
    }
    finish = builder.Finish();
    if (!s.ok() && finish.ok()) {
      r->counters.malformed.fetch_add(1, std::memory_order_relaxed);
      r->error.Set(std::string(s.message()));
      return;
    }
  } else {
    ros1msg::EnvelopeHeader h;
    h.type = m.getDataType();
    h.md5sum = m.getMD5Sum();
    h.definition = m.getMessageDefinition();
    h.latching = latching;
    h.callerid = callerid;
    h.topic = r->ros_topic;
    h.receive_time_ns = receive_ns;
    const std::string graph_name = GraphName(graph);
    h.origin_graph = graph_name;
    h.origin_bridge = link_->node();
    const bool have_bytes = latching;
    finish = ros1msg::BuildEnvelope(r->arena.get(), loan, r->channel, h, size,
                                    [&](std::span<uint8_t> out) {
                                      if (have_bytes) {
                                        std::memcpy(out.data(), r->scratch.data(), size);
                                        return;
                                      }
                                      ros::serialization::OStream os(out.data(), out.size());
                                      m.write(os);
                                    });
  }
  if (!finish.ok()) {
    r->counters.too_large.fetch_add(1, std::memory_order_relaxed);
    std::string why = finish.ErrorMessage();
    if (finish.status == transport::FramingStatus::kOverflow) {
      // The transport's fix names a stack config; the bridge may have made
      // the channel itself, sized by its own options.
      absl::StrAppend(
          &why, "; if the bridge made it: stop the processes that use it, run `",
          shm::Channel::CleanCommand(options_.channels),
          "` and start the bridge with a larger max_size= on the pair (or "
          "--max-size)");
    }
    r->error.Set(why);
    return;
  }
  // Stamped at commit; tagged with this graph, so no bridge of it sends
  // the message back into it (also after a net bridge carried it).
  transport::SendTimes tag;
  tag.origin = graph;
  const transport::PublishResult sent =
      r->publisher->Send(finish.size, &tag, finish.offset);
  if (sent.status != transport::PublishStatus::kOk) {
    r->counters.dropped_full.fetch_add(1, std::memory_order_relaxed);
    r->error.Set(absl::StrCat("send: ", transport::ToString(sent.status)));
    return;
  }
  r->counters.forwarded.fetch_add(1, std::memory_order_relaxed);
}

void Bridge::Impl::OnTetherMessage(TetherToRos* r,
                                   const transport::RawMessage& m) {
  // Our own ROS -> tether publisher on this channel ("both").
  if (m.context.publisher_pid == static_cast<uint32_t>(::getpid())) {
    r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Taken from this ROS graph by a bridge of it, here or on another
  // instance whose net bridge carried it to this one: ROS has it already.
  if (FromThisGraph(m.context.origin, 0)) {
    r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::unique_ptr<OutboxItem> item = outbox_.Acquire(r->outbox_topic);
  if (r->typed != nullptr) {
    transport::SlotMessageReader reader(m.bytes);
    absl::Status s = absl::InvalidArgumentError(
        transport::FramingStatusName(reader.status()));
    if (reader.ok()) {
      try {
        s = ros1msg::CapnpToRos(
            *r->typed->parsed,
            reader.getRoot<capnp::DynamicStruct>(r->typed->schema), &item->data);
      } catch (const kj::Exception& e) {
        s = absl::InvalidArgumentError(e.getDescription().cStr());
      }
    }
    if (!s.ok()) {
      r->counters.malformed.fetch_add(1, std::memory_order_relaxed);
      r->error.Set(absl::StrCat("queue index ", m.context.queue_index, ": ",
                                s.message()));
      outbox_.Recycle(r->outbox_topic, std::move(item));
      return;
    }
    item->type = std::string(r->typed->ros_type);
    item->md5sum = std::string(r->typed->md5sum);
    item->definition = std::string(r->typed->definition);
    item->latching = r->latch;
    item->origin_graph = 0;
  } else {
    ros1msg::EnvelopeView v;
    if (absl::Status s = ros1msg::ReadEnvelope(m.bytes, &v); !s.ok()) {
      r->counters.malformed.fetch_add(1, std::memory_order_relaxed);
      r->error.Set(absl::StrCat("queue index ", m.context.queue_index, ": ",
                                s.message()));
      outbox_.Recycle(r->outbox_topic, std::move(item));
      return;
    }
    item->origin_graph = ParseGraphName(v.header.origin_graph).value_or(0);
    if (FromThisGraph(0, item->origin_graph)) {
      // It came from this ROS graph: ROS has it already.
      r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
      outbox_.Recycle(r->outbox_topic, std::move(item));
      return;
    }
    if (v.header.type.empty() || v.header.md5sum.empty()) {
      r->counters.malformed.fetch_add(1, std::memory_order_relaxed);
      r->error.Set("an envelope without type or md5sum cannot go into ROS");
      outbox_.Recycle(r->outbox_topic, std::move(item));
      return;
    }
    item->data.assign(v.data.begin(), v.data.end());
    item->type.assign(v.header.type.data(), v.header.type.size());
    item->md5sum.assign(v.header.md5sum.data(), v.header.md5sum.size());
    item->definition.assign(v.header.definition.data(), v.header.definition.size());
    item->latching = v.header.latching || r->latch;
  }
  item->origin = m.context.origin;
  outbox_.Push(r->outbox_topic, std::move(item));
}

void Bridge::Impl::PublisherThread() {
  // Nothing goes into ROS before the graph's id is known: a message taken
  // in before then (a latched one replayed at start) was checked against
  // the provisional id only. They wait in the outbox.
  while (!joined_graph_.load(std::memory_order_acquire)) {
    if (shut_down_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (;;) {
    int topic = -1;
    std::unique_ptr<OutboxItem> item = outbox_.Pop(200, &topic);
    if (item == nullptr) {
      if (shut_down_) return;
      continue;
    }
    TetherToRos* r;
    {
      std::lock_guard<std::mutex> lock(routes_mu_);
      r = by_outbox_topic_.at(topic);
    }
    // Checked again with the id as it is now (OnTetherMessage may have run
    // with the provisional id, or before the id changed).
    if (FromThisGraph(item->origin, item->origin_graph)) {
      r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
      outbox_.Recycle(topic, std::move(item));
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(r->mu);
      if (!r->publisher || r->advertised_type != item->type ||
          r->advertised_md5 != item->md5sum ||
          r->advertised_latch != item->latching) {
        if (r->publisher) {
          r->error.Set(absl::StrCat("type changed from ", r->advertised_type,
                                    " to ", item->type, "; advertised again"));
          r->publisher.shutdown();
        }
        r->shape.morph(item->md5sum, item->type, item->definition,
                       item->latching ? "1" : "0");
        r->publisher = r->shape.advertise(*nh_, r->ros_topic,
                                          options_.ros_queue_size, item->latching);
        r->advertised_type = item->type;
        r->advertised_md5 = item->md5sum;
        r->advertised_latch = item->latching;
      }
      r->shape.morph(item->md5sum, item->type, item->definition,
                     item->latching ? "1" : "0");
      ros::serialization::IStream is(item->data.data(),
                                     static_cast<uint32_t>(item->data.size()));
      r->shape.read(is);
      r->publisher.publish(r->shape);
    }
    r->counters.forwarded.fetch_add(1, std::memory_order_relaxed);
    outbox_.Recycle(topic, std::move(item));
  }
}

}  // namespace tether::ros_bridge
