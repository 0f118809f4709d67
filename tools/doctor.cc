#include "tools/doctor.h"

#include "util/json_writer.h"

namespace tether::tools {
namespace {

// Appends `text` wrapped at `width` columns, each line starting with
// `indent`.
void AppendWrapped(std::string& out, std::string_view text, size_t indent,
                   size_t width = 79) {
  size_t column = 0;
  bool line_start = true;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view()
                                           : text.substr(space + 1);
    if (word.empty()) continue;
    if (!line_start && column + 1 + word.size() > width) {
      out += "\n";
      line_start = true;
    }
    if (line_start) {
      out.append(indent, ' ');
      column = indent;
      line_start = false;
    } else {
      out += " ";
      ++column;
    }
    out += word;
    column += word.size();
  }
  out += "\n";
}

}  // namespace

std::string FormatDoctorText(const DoctorInputs& inputs,
                             const std::vector<CheckResult>& results) {
  std::string out = "tether doctor: Linux " + KernelReleaseText(inputs) + ", " +
                    std::to_string(inputs.online_cpus) + " CPUs\n";
  int counts[3] = {0, 0, 0};
  for (const CheckResult& r : results) {
    ++counts[static_cast<int>(r.verdict)];
    std::string head(VerdictName(r.verdict));
    head.resize(6, ' ');
    out += "\n" + head + r.title + "\n";
    AppendWrapped(out, r.detail, 6);
    if (!r.fix.empty()) AppendWrapped(out, "fix: " + r.fix, 6);
  }
  out += "\n" + std::to_string(counts[0]) + " OK, " +
         std::to_string(counts[1]) + " WARN, " + std::to_string(counts[2]) +
         " FAIL\n";
  return out;
}

std::string FormatDoctorJson(const DoctorInputs& inputs,
                             const std::vector<CheckResult>& results) {
  int counts[3] = {0, 0, 0};
  for (const CheckResult& r : results) ++counts[static_cast<int>(r.verdict)];
  const loop::KernelFeatures& k = inputs.kernel;
  absl::StatusOr<loop::WakeBackendChoice> backend = loop::ChooseWakeBackend(k);

  util::JsonWriter json;
  json.BeginObject();
  json.Key("ok").Bool(counts[2] == 0);
  json.Key("counts").BeginObject();
  json.Key("ok").Int(counts[0]);
  json.Key("warn").Int(counts[1]);
  json.Key("fail").Int(counts[2]);
  json.EndObject();
  json.Key("wake_backend");
  if (backend.ok()) {
    json.String(loop::WakeBackendName(backend->backend));
  } else {
    json.Null();
  }
  json.Key("kernel").BeginObject();
  json.Key("release").String(k.kernel_release);
  json.Key("build").String(k.kernel_build);
  json.Key("preempt_rt").Bool(k.preempt_rt);
  json.Key("io_uring").Bool(k.io_uring);
  json.Key("io_uring_disabled_sysctl");
  if (k.io_uring_disabled_sysctl) {
    json.Int(*k.io_uring_disabled_sysctl);
  } else {
    json.Null();
  }
  json.Key("setup_single_issuer").Bool(k.setup_single_issuer);
  json.Key("setup_defer_taskrun").Bool(k.setup_defer_taskrun);
  json.Key("register_ring_fd").Bool(k.register_ring_fd);
  json.Key("op_futex_wait").Bool(k.op_futex_wait);
  json.Key("op_futex_wake").Bool(k.op_futex_wake);
  json.Key("op_futex_waitv").Bool(k.op_futex_waitv);
  json.Key("futex_waitv_syscall").Bool(k.futex_waitv_syscall);
  json.EndObject();
  json.Key("checks").BeginArray();
  for (const CheckResult& r : results) {
    json.BeginObject();
    json.Key("id").String(r.id);
    json.Key("title").String(r.title);
    json.Key("verdict").String(VerdictName(r.verdict));
    json.Key("detail").String(r.detail);
    json.Key("fix").String(r.fix);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
  return json.str();
}

}  // namespace tether::tools
