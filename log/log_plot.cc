#include "log/log_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "capnp/dynamic.h"
#include "kj/exception.h"
#include "transport/framing.h"

namespace tether::log {
namespace {

struct Step {
  std::string name;
  std::optional<uint32_t> index;
};

// One field to plot, resolved against its channel's schema. A channel
// re-created while it was recorded is in the log once per incarnation under
// one name: the field is read from every incarnation whose schema has it
// (the path is by field names, so one path serves them all).
struct Resolved {
  const LogChannel* channel;  // the first incarnation that has the field
  std::vector<const LogChannel*> incarnations;  // all that have it
  std::vector<Step> path;
};

std::string FieldNames(capnp::StructSchema s) {
  std::vector<std::string> names;
  for (capnp::StructSchema::Field f : s.getFields()) {
    names.emplace_back(f.getProto().getName().cStr());
  }
  return absl::StrJoin(names, ", ");
}

bool IsNumber(capnp::Type t) {
  switch (t.which()) {
    case capnp::schema::Type::BOOL:
    case capnp::schema::Type::INT8:
    case capnp::schema::Type::INT16:
    case capnp::schema::Type::INT32:
    case capnp::schema::Type::INT64:
    case capnp::schema::Type::UINT8:
    case capnp::schema::Type::UINT16:
    case capnp::schema::Type::UINT32:
    case capnp::schema::Type::UINT64:
    case capnp::schema::Type::FLOAT32:
    case capnp::schema::Type::FLOAT64:
    case capnp::schema::Type::ENUM:
      return true;
    default:
      return false;
  }
}

// The plottable leaves under `s`, as paths ("inner.position",
// "values[i]", "joints[i].velocity"), down to a few levels (schemas may
// recurse).
void NumericFields(capnp::StructSchema s, const std::string& prefix, int depth,
                   std::vector<std::string>* out) {
  for (capnp::StructSchema::Field f : s.getFields()) {
    std::string name = prefix + f.getProto().getName().cStr();
    capnp::Type t = f.getType();
    if (t.isList()) {
      name += "[i]";
      t = t.asList().getElementType();
    }
    if (IsNumber(t)) {
      out->push_back(std::move(name));
    } else if (t.isStruct() && depth < 3) {
      NumericFields(t.asStruct(), name + ".", depth + 1, out);
    }
  }
}

absl::StatusOr<std::vector<Step>> ResolvePath(LogReader& reader,
                                              const LogChannel& channel,
                                              const std::string& field);

absl::StatusOr<Resolved> Resolve(LogReader& reader, const std::string& field) {
  const LogChannel* channel = nullptr;
  for (const LogChannel& c : reader.channels()) {
    if (field.size() > c.name.size() + 1 && field.compare(0, c.name.size(), c.name) == 0 &&
        field[c.name.size()] == '.' &&
        (channel == nullptr || c.name.size() > channel->name.size())) {
      channel = &c;
    }
  }
  if (channel == nullptr) {
    const std::string bare = !field.empty() && field.back() == '.'
                                 ? field.substr(0, field.size() - 1)
                                 : field;
    if (const LogChannel* c = reader.FindChannel(bare)) {
      // The channel alone: say which fields it has.
      absl::StatusOr<capnp::StructSchema> type = reader.MessageType(*c);
      if (!type.ok()) return type.status();
      std::vector<std::string> numeric;
      NumericFields(*type, "", 0, &numeric);
      if (numeric.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field ", field, " names the channel ", bare, " but no field, and ",
            type->getShortDisplayName().cStr(),
            " has no numeric field to plot"));
      }
      constexpr size_t kMaxListed = 40;
      std::string listed = absl::StrJoin(
          numeric.begin(),
          numeric.begin() + std::min(numeric.size(), kMaxListed), ", ");
      if (numeric.size() > kMaxListed) {
        absl::StrAppend(&listed, ", ... (", numeric.size() - kMaxListed,
                        " more)");
      }
      return absl::InvalidArgumentError(
          absl::StrCat("field ", field, " names the channel ", bare,
                       " but no field in it: write ", bare,
                       ".FIELD with one of its numeric fields (name[i] for "
                       "list elements): ",
                       listed));
    }
    std::vector<std::string> names;
    for (const LogChannel& c : reader.channels()) names.push_back(c.name);
    return absl::InvalidArgumentError(absl::StrCat(
        "field ", field, " names no channel of the log; write CHANNEL.field "
        "with one of: ", absl::StrJoin(names, ", ")));
  }
  // Every incarnation of the name; the first one's error if none has it.
  Resolved r{nullptr, {}, {}};
  absl::Status first_error;
  for (const LogChannel& c : reader.channels()) {
    if (c.name != channel->name) continue;
    absl::StatusOr<std::vector<Step>> path = ResolvePath(reader, c, field);
    if (!path.ok()) {
      if (first_error.ok()) first_error = path.status();
      continue;
    }
    if (r.channel == nullptr) {
      r.channel = &c;
      r.path = std::move(*path);
    }
    r.incarnations.push_back(&c);
  }
  if (r.channel == nullptr) return first_error;
  return r;
}

absl::StatusOr<std::vector<Step>> ResolvePath(LogReader& reader,
                                              const LogChannel& channel,
                                              const std::string& field) {
  absl::StatusOr<capnp::StructSchema> type = reader.MessageType(channel);
  if (!type.ok()) return type.status();
  std::vector<Step> steps;
  capnp::Type t(*type);
  const std::string path = field.substr(channel.name.size() + 1);
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    Step step;
    std::string text(part);
    if (const size_t open = text.find('['); open != std::string::npos) {
      uint32_t index = 0;
      if (text.back() != ']' ||
          !absl::SimpleAtoi(text.substr(open + 1, text.size() - open - 2), &index)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field ", field, ": '", text, "' is not name or name[index]"));
      }
      step.index = index;
      text.resize(open);
    }
    step.name = text;
    if (!t.isStruct()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field ", field, ": ", step.name, " is inside a value that is not a "
          "struct"));
    }
    capnp::StructSchema s = t.asStruct();
    KJ_IF_MAYBE(f, s.findFieldByName(step.name)) {
      t = f->getType();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "field ", field, ": ", s.getShortDisplayName().cStr(), " has no field ",
          step.name, " (it has: ", FieldNames(s), ")"));
    }
    if (step.index.has_value()) {
      if (!t.isList()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field ", field, ": ", step.name, " is not a list"));
      }
      t = t.asList().getElementType();
    }
    steps.push_back(std::move(step));
  }
  if (!IsNumber(t)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field ", field, " is not a number (only numbers, booleans and enums "
        "can be plotted)"));
  }
  return steps;
}

// Where a path's index was past its list's end in a message.
struct IndexMiss {
  size_t step = 0;    // in the path
  uint32_t size = 0;  // of the list there
};

// The value at `path`, or nullopt (an index past a list's end: `*miss`
// says where).
std::optional<double> ValueAt(capnp::DynamicStruct::Reader root,
                              const std::vector<Step>& path, IndexMiss* miss) {
  capnp::DynamicValue::Reader v = root;
  for (size_t k = 0; k < path.size(); ++k) {
    const Step& step = path[k];
    v = v.as<capnp::DynamicStruct>().get(step.name);
    if (step.index.has_value()) {
      capnp::DynamicList::Reader list = v.as<capnp::DynamicList>();
      if (*step.index >= list.size()) {
        *miss = {k, list.size()};
        return std::nullopt;
      }
      v = list[*step.index];
    }
  }
  switch (v.getType()) {
    case capnp::DynamicValue::BOOL:
      return v.as<bool>() ? 1.0 : 0.0;
    case capnp::DynamicValue::INT:
      return static_cast<double>(v.as<int64_t>());
    case capnp::DynamicValue::UINT:
      return static_cast<double>(v.as<uint64_t>());
    case capnp::DynamicValue::FLOAT:
      return v.as<double>();
    case capnp::DynamicValue::ENUM:
      return static_cast<double>(v.as<capnp::DynamicEnum>().getRaw());
    default:
      return std::nullopt;
  }
}

std::string TickLabel(double v, double step) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e6 || a < 1e-4) return absl::StrFormat("%.3g", v);
  const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return absl::StrFormat("%.*f", decimals, v);
}

constexpr Rgb kBlack{0, 0, 0};
constexpr Rgb kGrid{225, 225, 225};
constexpr Rgb kText{40, 40, 40};
constexpr Rgb kGapMark{200, 60, 60};
constexpr Rgb kPalette[] = {{31, 119, 180}, {214, 39, 40}, {44, 160, 44},
                            {255, 127, 14}, {148, 103, 189}, {23, 190, 207}};

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int max_ticks) {
  std::vector<double> ticks;
  if (!(hi > lo) || max_ticks < 2) return {lo};
  const double raw = (hi - lo) / (max_ticks - 1);
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

absl::StatusOr<std::vector<PlotSeries>> ReadPlotSeries(
    LogReader& reader, const std::vector<std::string>& fields,
    const PlotRange& range) {
  if (fields.empty()) return absl::InvalidArgumentError("no field to plot");
  std::vector<Resolved> resolved;
  std::vector<PlotSeries> series(fields.size());
  LogReadOptions read;
  for (size_t i = 0; i < fields.size(); ++i) {
    absl::StatusOr<Resolved> r = Resolve(reader, fields[i]);
    if (!r.ok()) return r.status();
    series[i].field = fields[i];
    for (const LogChannel* c : r->incarnations) read.channels.insert(c->id);
    resolved.push_back(std::move(*r));
  }
  const int64_t start = reader.start_ns();
  if (range.start_s.has_value()) {
    read.start_ns = start + static_cast<int64_t>(*range.start_s * 1e9);
  }
  if (range.end_s.has_value()) {
    read.end_ns = start + static_cast<int64_t>(*range.end_s * 1e9);
  }
  // By MCAP channel id: the fields read from its messages, and its type.
  std::map<uint16_t, std::vector<size_t>> by_channel;
  std::map<uint16_t, capnp::StructSchema> types;
  for (size_t i = 0; i < resolved.size(); ++i) {
    for (const LogChannel* c : resolved[i].incarnations) {
      by_channel[c->id].push_back(i);
      types[c->id] = *reader.MessageType(*c);  // loaded by Resolve
    }
  }
  // Per field: messages whose value was read or past a list's end, and for
  // the latter the first place it missed with the longest list seen there.
  struct Misses {
    uint64_t read = 0;
    uint64_t past_end = 0;
    size_t step = 0;
    uint32_t longest = 0;
  };
  std::vector<Misses> misses(fields.size());
  std::unique_ptr<LogCursor> cursor = reader.Read(read);
  LogMessage m;
  while (cursor->Next(&m)) {
    const std::vector<size_t>& users = by_channel[m.channel->id];
    transport::SlotMessageReader r(m.data);
    bool ok = r.ok();
    try {
      if (ok) {
        capnp::DynamicStruct::Reader root =
            r.getRoot<capnp::DynamicStruct>(types[m.channel->id]);
        const double t = (m.monotonic_send_ns - start) / 1e9;
        for (size_t i : users) {
          IndexMiss miss;
          ++misses[i].read;
          if (std::optional<double> v =
                  ValueAt(root, resolved[i].path, &miss)) {
            series[i].time_s.push_back(t);
            series[i].value.push_back(*v);
          } else {
            Misses& ms = misses[i];
            if (ms.past_end == 0 || miss.step == ms.step) {
              ms.step = miss.step;
              ms.longest = std::max(ms.longest, miss.size);
            }
            ++ms.past_end;
          }
        }
      }
    } catch (const kj::Exception&) {
      ok = false;
    }
    if (!ok) {
      for (size_t i : users) ++series[i].undecodable;
    }
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    const Misses& ms = misses[i];
    if (ms.read == 0 || ms.past_end < ms.read) continue;
    // Not one value: the index is wrong, not the data.
    const Step& step = resolved[i].path[ms.step];
    return absl::InvalidArgumentError(absl::StrFormat(
        "field %s: index %u is past the end of %s in every message of %s "
        "(%u messages; %s)",
        fields[i], *step.index, step.name, resolved[i].channel->name, ms.read,
        ms.longest == 0
            ? absl::StrCat(step.name, " is empty in all of them")
            : absl::StrFormat("the longest %s has %u elements: use an index "
                              "below %u",
                              step.name, ms.longest, ms.longest)));
  }
  if (absl::StatusOr<std::vector<GapRecord>> gaps = reader.Gaps(); gaps.ok()) {
    for (const GapRecord& g : *gaps) {
      const LogChannel* owner = reader.GapOwner(g);
      for (size_t i = 0; i < resolved.size(); ++i) {
        const auto& mine = resolved[i].incarnations;
        // A record from before records named their incarnation is the
        // name's: it counts for any field of that name.
        const bool ours =
            g.mcap_channel_id.has_value()
                ? std::find(mine.begin(), mine.end(), owner) != mine.end()
                : resolved[i].channel->name == g.channel;
        if (ours) series[i].missed += g.missed;
      }
    }
  }
  return series;
}

Image RenderPlot(const std::vector<PlotSeries>& series,
                 const PlotOptions& options) {
  constexpr int kScale = 2;
  const int text_h = Image::TextHeight(kScale);
  const int top_title = options.title.empty() ? 0 : text_h + 16;
  const int left = 130, right = 30;
  const int panel_top_pad = text_h + 14, panel_bottom_pad = text_h + 14;
  const int bottom_label = text_h + 14;
  const int n = static_cast<int>(std::max<size_t>(series.size(), 1));
  Image img(options.width, top_title + n * options.panel_height + bottom_label);
  if (!options.title.empty()) img.Text(left, 8, options.title, kText, kScale);

  double t0 = std::numeric_limits<double>::max(), t1 = -t0;
  for (const PlotSeries& s : series) {
    if (s.time_s.empty()) continue;
    t0 = std::min(t0, s.time_s.front());
    t1 = std::max(t1, s.time_s.back());
  }
  if (t0 > t1) t0 = 0, t1 = 1;
  if (t1 <= t0) t1 = t0 + 1;
  const int x_lo = left, x_hi = options.width - right;
  auto to_x = [&](double t) {
    return x_lo + static_cast<int>(std::lround((t - t0) / (t1 - t0) * (x_hi - x_lo)));
  };
  const std::vector<double> x_ticks = NiceTicks(t0, t1, 10);
  const double x_step = x_ticks.size() > 1 ? x_ticks[1] - x_ticks[0] : 1;

  for (size_t p = 0; p < series.size(); ++p) {
    const PlotSeries& s = series[p];
    const Rgb color = kPalette[p % (sizeof(kPalette) / sizeof(kPalette[0]))];
    const int panel_y = top_title + static_cast<int>(p) * options.panel_height;
    const int y_lo = panel_y + panel_top_pad;
    const int y_hi = panel_y + options.panel_height - panel_bottom_pad;
    double v0 = std::numeric_limits<double>::max(), v1 = -v0;
    for (double v : s.value) {
      if (!std::isfinite(v)) continue;
      v0 = std::min(v0, v);
      v1 = std::max(v1, v);
    }
    if (v0 > v1) v0 = 0, v1 = 1;
    if (v1 - v0 < 1e-12 * std::max(1.0, std::abs(v0))) {
      const double pad = std::max(std::abs(v0) * 0.1, 1e-9);
      v0 -= pad;
      v1 += pad;
    } else {
      const double pad = (v1 - v0) * 0.05;
      v0 -= pad;
      v1 += pad;
    }
    auto to_y = [&](double v) {
      return y_hi - static_cast<int>(std::lround((v - v0) / (v1 - v0) * (y_hi - y_lo)));
    };
    // Grid and tick labels.
    const std::vector<double> y_ticks = NiceTicks(v0, v1, 6);
    const double y_step = y_ticks.size() > 1 ? y_ticks[1] - y_ticks[0] : 1;
    for (double v : y_ticks) {
      const int y = to_y(v);
      if (y < y_lo || y > y_hi) continue;
      img.Line(x_lo, y, x_hi, y, kGrid);
      const std::string label = TickLabel(v, y_step);
      img.Text(x_lo - 8 - Image::TextWidth(label, kScale), y - text_h / 2, label,
               kText, kScale);
    }
    for (double t : x_ticks) {
      const int x = to_x(t);
      img.Line(x, y_lo, x, y_hi, kGrid);
      const std::string label = TickLabel(t, x_step);
      img.Text(x - Image::TextWidth(label, kScale) / 2, y_hi + 6, label, kText,
               kScale);
    }
    img.Line(x_lo, y_lo, x_hi, y_lo, kBlack);
    img.Line(x_lo, y_hi, x_hi, y_hi, kBlack);
    img.Line(x_lo, y_lo, x_lo, y_hi, kBlack);
    img.Line(x_hi, y_lo, x_hi, y_hi, kBlack);
    std::string title = absl::StrFormat("%s  (%u samples", s.field, s.value.size());
    if (s.missed > 0) absl::StrAppendFormat(&title, ", %u missed", s.missed);
    if (s.undecodable > 0) absl::StrAppendFormat(&title, ", %u undecodable", s.undecodable);
    title += ")";
    img.Text(x_lo, panel_y + 6, title, color, kScale);
    // The line, broken where samples are much further apart than usual.
    std::vector<double> dts;
    for (size_t i = 1; i < s.time_s.size(); ++i) dts.push_back(s.time_s[i] - s.time_s[i - 1]);
    double typical = 0;
    if (!dts.empty()) {
      std::nth_element(dts.begin(), dts.begin() + dts.size() / 2, dts.end());
      typical = dts[dts.size() / 2];
    }
    for (size_t i = 0; i < s.value.size(); ++i) {
      if (!std::isfinite(s.value[i])) continue;
      const int x = to_x(s.time_s[i]), y = to_y(s.value[i]);
      const bool connect = i > 0 && std::isfinite(s.value[i - 1]) &&
                           (typical <= 0 || s.time_s[i] - s.time_s[i - 1] <= 5 * typical);
      if (connect) {
        img.Line(to_x(s.time_s[i - 1]), to_y(s.value[i - 1]), x, y, color, 2);
      } else {
        if (i > 0) img.Line(x, y_lo, x, y_lo + 6, kGapMark, 2);  // a break
        img.Line(x, y, x, y, color, 2);
      }
    }
  }
  const std::string x_label = "time since the start of the log (s)";
  img.Text((x_lo + x_hi - Image::TextWidth(x_label, kScale)) / 2,
           img.height() - text_h - 4, x_label, kText, kScale);
  return img;
}

}  // namespace tether::log
