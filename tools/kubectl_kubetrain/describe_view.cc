#include "tools/kubectl_kubetrain/describe_view.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "operator/kube/object.h"
#include "tools/kubectl_kubetrain/job_state.h"
#include "tools/kubectl_kubetrain/replica_ref.h"

namespace kubetrain::kubectl_plugin {
namespace {

using nlohmann::json;

// A table: columns padded to their widest cell, two spaces apart, the last
// one unpadded; every line indented by `indent`.
std::string Table(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, row[c]);
      if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

// A metric as kubectl shows a number: four significant digits.
std::string Number(double v) { return absl::StrFormat("%.4g", v); }

std::string Age(const std::string& time, int64_t now) {
  std::optional<int64_t> t = kube::ParseTimeMicros(time);
  if (!t) return "-";
  return ShortAge(now - *t);
}

std::string When(const std::string& time, int64_t now) {
  if (time.empty()) return "-";
  return absl::StrCat(time, " (", Age(time, now), " ago)");
}

int64_t EventTime(const json& e) {
  for (const char* key : {"lastTimestamp", "eventTime", "firstTimestamp"}) {
    if (auto t = kube::ParseTimeMicros(kube::StringAt(e, {key}))) return *t;
  }
  if (auto t = kube::ParseTimeMicros(kube::StringAt(e, {"metadata", "creationTimestamp"}))) {
    return *t;
  }
  return 0;
}

}  // namespace

std::string ShortAge(int64_t micros) {
  int64_t s = std::max<int64_t>(0, micros / 1000000);
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 120 * 60) return absl::StrCat(s / 60, "m");
  if (s < 48 * 3600) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

std::vector<json> JobEvents(const json& job, const std::vector<json>& pods,
                            const std::vector<json>& events, size_t limit) {
  const std::string name = kube::Name(job);
  std::set<std::string> pod_names;
  for (const json& pod : pods) pod_names.insert(kube::Name(pod));
  std::vector<json> out;
  for (const json& e : events) {
    const std::string kind = kube::StringAt(e, {"involvedObject", "kind"});
    const std::string object = kube::StringAt(e, {"involvedObject", "name"});
    if ((kind == "TrainingJob" && object == name) ||
        (kind == "Pod" && pod_names.count(object) > 0)) {
      out.push_back(e);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const json& a, const json& b) { return EventTime(a) < EventTime(b); });
  if (out.size() > limit) out.erase(out.begin(), out.end() - static_cast<ptrdiff_t>(limit));
  return out;
}

std::string RenderDescribe(const DescribeInput& in) {
  const json& job = in.job;
  const api::JobStatus status = JobStatusOf(job);
  const int64_t now = in.now_unix_micros;
  std::string out;
  absl::StrAppend(&out, "Name:         ", kube::Name(job), "\n");
  absl::StrAppend(&out, "Namespace:    ", kube::Namespace(job), "\n");
  absl::StrAppend(&out, "Phase:        ", JobPhase(job), "\n");
  absl::StrAppend(&out, "Created:      ",
                  When(kube::StringAt(job, {"metadata", "creationTimestamp"}), now), "\n");
  absl::StrAppend(&out, "Started:      ", When(status.start_time, now), "\n");
  if (!status.completion_time.empty()) {
    absl::StrAppend(&out, "Completed:    ", When(status.completion_time, now), "\n");
  }
  absl::StrAppend(&out, "Restarts:     ", status.restart_count.value_or(0),
                  "   Disruptions: ", status.disruption_count.value_or(0), "\n");

  out += "Conditions:\n";
  if (!status.conditions.empty()) {
    std::vector<std::vector<std::string>> rows = {{"TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}};
    for (const api::Condition& c : status.conditions) {
      rows.push_back({c.type, api::ConditionStatusName(c.status), c.reason,
                      Age(c.last_transition_time, now), c.message});
    }
    out += Table(rows, "  ");
  } else {
    out += "  <none>\n";
  }

  if (status.last_failure) {
    const api::LastFailure& failure = *status.last_failure;
    out += "Last failure:\n";
    const ReplicaRef ref{api::ReplicaTypeLower(failure.replica_type), failure.replica_index};
    std::vector<std::vector<std::string>> rows = {
        {"Replica:", ReplicaName(ref)},
        {"Pod:", failure.pod},
        {"Node:", failure.node},
        {"Exit code:", failure.exit_code ? absl::StrCat(*failure.exit_code) : ""},
        {"Reason:", failure.reason},
        {"Message:", failure.message},
        {"Time:", When(failure.time, now)}};
    out += Table(rows, "  ");
  }

  out += "Replicas:\n";
  if (!status.replica_statuses.empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"TYPE", "ACTIVE", "READY", "SUCCEEDED", "FAILED", "RESTARTS"}};
    // By name, as the status JSON lists them.
    std::map<std::string, const api::ReplicaStatus*> by_name;
    for (const auto& [type, rs] : status.replica_statuses) {
      by_name[api::ReplicaTypeName(type)] = &rs;
    }
    for (const auto& [type, rs] : by_name) {
      rows.push_back({type, absl::StrCat(rs->active), absl::StrCat(rs->ready),
                      absl::StrCat(rs->succeeded), absl::StrCat(rs->failed),
                      absl::StrCat(rs->restarts)});
    }
    out += Table(rows, "  ");
  } else {
    out += "  <none>\n";
  }

  if (status.progress && !(*status.progress == api::Progress{})) {
    const api::Progress& progress = *status.progress;
    std::string line = "Progress:     step ";
    absl::StrAppend(&line, progress.step ? absl::StrCat(*progress.step) : "-");
    if (progress.total_steps) absl::StrAppend(&line, "/", *progress.total_steps);
    if (progress.loss) absl::StrAppend(&line, "  loss ", Number(*progress.loss));
    if (progress.accuracy) absl::StrAppend(&line, "  accuracy ", Number(*progress.accuracy));
    if (progress.samples_per_second) {
      absl::StrAppend(&line, "  samples/s ", Number(*progress.samples_per_second));
    }
    if (!progress.updated_at.empty()) {
      absl::StrAppend(&line, "  (updated ", Age(progress.updated_at, now), " ago)");
    }
    absl::StrAppend(&out, line, "\n");
  }

  out += "Pods:\n";
  if (!in.pods.empty()) {
    std::vector<std::pair<ReplicaRef, const json*>> sorted;
    for (const json& pod : in.pods) {
      sorted.emplace_back(ReplicaOfPod(pod).value_or(ReplicaRef{"?", 0}), &pod);
    }
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::vector<std::string>> rows = {
        {"REPLICA", "POD", "PHASE", "RESTARTS", "NODE", "AGE"}};
    for (const auto& [ref, pod] : sorted) {
      std::optional<PodView> view = ViewOfPod(*pod, "");
      std::string phase = kube::StringAt(*pod, {"status", "phase"});
      if (view && !view->waiting_reason.empty()) phase = view->waiting_reason;
      if (kube::IsBeingDeleted(*pod)) phase = "Terminating";
      rows.push_back({ReplicaName(ref), kube::Name(*pod), phase.empty() ? "-" : phase,
                      absl::StrCat(view ? view->restarts : 0),
                      kube::StringAt(*pod, {"spec", "nodeName"}).empty()
                          ? "-"
                          : kube::StringAt(*pod, {"spec", "nodeName"}),
                      Age(kube::StringAt(*pod, {"metadata", "creationTimestamp"}), now)});
    }
    out += Table(rows, "  ");
  } else {
    out += "  <none>\n";
  }

  out += "Events:\n";
  std::vector<json> events = JobEvents(job, in.pods, in.events, in.max_events);
  if (!events.empty()) {
    std::vector<std::vector<std::string>> rows = {{"AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"}};
    for (const json& e : events) {
      const int64_t count = kube::IntAt(e, {"count"}, 1);
      std::string age = ShortAge(now - EventTime(e));
      if (count > 1) absl::StrAppend(&age, " (x", count, ")");
      rows.push_back(
          {age, kube::StringAt(e, {"type"}), kube::StringAt(e, {"reason"}),
           absl::StrCat(
               kube::StringAt(e, {"involvedObject", "kind"}) == "Pod" ? "pod/" : "trainingjob/",
               kube::StringAt(e, {"involvedObject", "name"})),
           kube::StringAt(e, {"message"})});
    }
    out += Table(rows, "  ");
  } else {
    out += "  <none>\n";
  }
  return out;
}

}  // namespace kubetrain::kubectl_plugin
