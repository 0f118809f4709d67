#include "ros_bridge/rosbag_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "rosbag/bag.h"
#include "rosbag/exceptions.h"
#include "rosbag/view.h"

namespace tether::ros_bridge {
namespace {

class RosBagReader final : public ros1msg::BagReader {
 public:
  absl::Status Open(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("cannot read ", path));
    }
    try {
      bag_.open(path, rosbag::bagmode::Read);
      view_ = std::make_unique<rosbag::View>(bag_);
      for (const rosbag::ConnectionInfo* c : view_->getConnections()) {
        ros1msg::BagConnection info;
        info.id = static_cast<uint32_t>(connections_.size());
        info.topic = c->topic;
        info.type = c->datatype;
        info.md5sum = c->md5sum;
        info.definition = c->msg_def;
        if (c->header != nullptr) {
          auto it = c->header->find("callerid");
          if (it != c->header->end()) info.callerid = it->second;
          it = c->header->find("latching");
          info.latching = it != c->header->end() && it->second == "1";
        }
        by_header_[c->header.get()] = info.id;
        connections_.push_back(std::move(info));
      }
      // One pass over the index for each connection's largest message (what
      // a channel replaying it must hold).
      for (const rosbag::MessageInstance& m : *view_) {
        auto found = by_header_.find(m.getConnectionHeader().get());
        if (found == by_header_.end()) continue;
        ros1msg::BagConnection& c = connections_[found->second];
        c.max_data_size = std::max(c.max_data_size, m.size());
        ++c.message_count;
      }
      summary_.message_count = view_->size();
      if (summary_.message_count > 0) {
        summary_.start_time_ns = static_cast<int64_t>(view_->getBeginTime().toNSec());
        summary_.end_time_ns = static_cast<int64_t>(view_->getEndTime().toNSec());
      }
      it_ = view_->begin();
    } catch (const rosbag::BagException& e) {
      return absl::DataLossError(absl::StrCat(
          path, " is not a readable ROS bag (", e.what(),
          "); a bag left as .bag.active by a killed recorder needs "
          "`rosbag reindex` first"));
    }
    return absl::OkStatus();
  }

  const std::vector<ros1msg::BagConnection>& connections() const override {
    return connections_;
  }
  ros1msg::BagSummary summary() const override { return summary_; }

  absl::StatusOr<bool> Next(ros1msg::BagMessage* out) override {
    try {
      if (it_ == view_->end()) return false;
      const rosbag::MessageInstance& m = *it_;
      // The connection by what identifies it in the bag.
      out->connection = ConnectionOf(m);
      out->time_ns = static_cast<int64_t>(m.getTime().toNSec());
      out->data.resize(m.size());
      ros::serialization::OStream os(out->data.data(),
                                     static_cast<uint32_t>(out->data.size()));
      m.write(os);
      ++it_;
      return true;
    } catch (const rosbag::BagException& e) {
      return absl::DataLossError(absl::StrCat("reading the bag: ", e.what()));
    }
  }

 private:
  // A message's connection: its header object is its ConnectionInfo's.
  uint32_t ConnectionOf(const rosbag::MessageInstance& m) {
    auto it = by_header_.find(m.getConnectionHeader().get());
    return it != by_header_.end() ? it->second : 0;
  }

  rosbag::Bag bag_;
  std::unique_ptr<rosbag::View> view_;
  rosbag::View::iterator it_;
  std::vector<ros1msg::BagConnection> connections_;
  std::map<const ros::M_string*, uint32_t> by_header_;
  ros1msg::BagSummary summary_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ros1msg::BagReader>> OpenRosBag(
    const std::string& path) {
  auto reader = std::make_unique<RosBagReader>();
  if (absl::Status s = reader->Open(path); !s.ok()) return s;
  return reader;
}

}  // namespace tether::ros_bridge
