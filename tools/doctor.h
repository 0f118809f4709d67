// tools: `tether doctor` as a library. Gathers machine facts (kernel
// features, limits, capabilities, /dev/shm, CPUs: tools/doctor_inputs.h)
// from injectable paths, judges each as OK/WARN/FAIL with a fix
// (tools/doctor_checks.h), and renders the report as text or JSON (here).
#ifndef TETHER_TOOLS_DOCTOR_H_
#define TETHER_TOOLS_DOCTOR_H_

#include <string>
#include <vector>

#include "tools/doctor_checks.h"
#include "tools/doctor_inputs.h"

namespace tether::tools {

// The report for people: one block per check (verdict, title, detail, fix)
// and a closing count. Any thread; not RT-safe (allocates).
std::string FormatDoctorText(const DoctorInputs& inputs,
                             const std::vector<CheckResult>& results);

// The report as one JSON object: "ok", "counts", "kernel", "wake_backend"
// and "checks" (an array of {id, title, verdict, detail, fix}).
// Any thread; not RT-safe (allocates).
std::string FormatDoctorJson(const DoctorInputs& inputs,
                             const std::vector<CheckResult>& results);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_DOCTOR_H_
