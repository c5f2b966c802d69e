#include "tools/node_agent/kubelet_endpoints.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/node_agent/container_log_index.h"

namespace kubetrain::node_agent {
namespace {

constexpr int64_t kChunk = 64 << 10;

absl::StatusOr<bool> ParseBool(const std::map<std::string, std::string>& query,
                               const std::string& name) {
  auto it = query.find(name);
  if (it == query.end()) return false;
  const std::string& v = it->second;
  if (v == "true" || v == "1" || v == "True" || v == "TRUE" || v == "t" || v == "T") return true;
  if (v == "false" || v == "0" || v == "False" || v == "FALSE" || v == "f" || v == "F" ||
      v.empty()) {
    return false;
  }
  return absl::InvalidArgumentError(absl::StrCat(name, ": invalid boolean \"", v, "\""));
}

absl::StatusOr<std::optional<int64_t>> ParseInt(const std::map<std::string, std::string>& query,
                                                const std::string& name, int64_t min) {
  auto it = query.find(name);
  if (it == query.end()) return std::optional<int64_t>();
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": invalid integer \"", it->second, "\""));
  }
  if (v < min) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": must be at least ", min));
  }
  return std::optional<int64_t>(v);
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ReadRange(const std::string& path, int64_t from, int64_t to) {
  if (to <= from) return "";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(from);
  std::string s(static_cast<size_t>(to - from), '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  return s;
}

// Where the run starting at `begin` is in the index now: its end once it
// has one; nullopt when the index no longer has it (a new pod of the name).
std::optional<LogRun> FindRun(const std::string& log, int64_t begin) {
  if (!Exists(RunIndexPath(log))) return std::nullopt;
  const std::vector<LogRun> runs = ParseRunIndex(ReadAll(RunIndexPath(log)));
  for (const LogRun& r : runs) {
    if (r.begin == begin) return r;
  }
  return std::nullopt;
}

absl::Status ServeContainerLogs(const std::string& logs_dir, const std::string& ns,
                                const std::string& pod, const std::string& container,
                                const ContainerLogOptions& o, kube::HttpsReply& reply,
                                absl::Duration poll) {
  const std::string pod_dir = absl::StrCat(logs_dir, "/", ns, "/", pod);
  if (!Exists(pod_dir)) {
    return absl::NotFoundError(absl::StrCat("pod \"", pod, "\" does not exist"));
  }
  const std::string log = absl::StrCat(pod_dir, "/", container, ".log");
  if (!Exists(RunIndexPath(log))) {
    return absl::NotFoundError(
        absl::StrCat("container \"", container, "\" not found in pod \"", pod, "\""));
  }
  std::vector<LogRun> runs = ParseRunIndex(ReadAll(RunIndexPath(log)));
  absl::StatusOr<LogRun> selected = SelectRun(runs, o.previous, pod, container);
  if (!selected.ok()) return selected.status();
  LogRun run = *selected;
  const int64_t size = FileSize(log);
  int64_t to = run.end ? std::min(*run.end, size) : size;
  int64_t pos = run.begin;
  std::string first = ReadRange(log, run.begin, to);
  if (o.tail_lines) {
    const size_t skip = TailStart(first, *o.tail_lines);
    pos += static_cast<int64_t>(skip);
    first.erase(0, skip);
  }
  int64_t budget = o.limit_bytes.value_or(INT64_MAX);
  if (static_cast<int64_t>(first.size()) > budget) first.resize(static_cast<size_t>(budget));
  budget -= static_cast<int64_t>(first.size());
  pos += static_cast<int64_t>(first.size());
  if (!reply.Write(first) || !o.follow || budget == 0) return absl::OkStatus();
  for (;;) {
    if (!run.end) {
      // The index first, then the size: bytes past a run's end (the next
      // run's, after the restart back-off) are never taken for its own.
      std::optional<LogRun> now = FindRun(log, run.begin);
      if (!now) return absl::OkStatus();  // the pod's logs were replaced
      run.end = now->end;
    }
    const int64_t size = FileSize(log);
    const int64_t limit = run.end ? std::min(*run.end, size) : size;
    if (pos < limit) {
      const int64_t n = std::min({limit - pos, kChunk, budget});
      const std::string bytes = ReadRange(log, pos, pos + n);
      if (bytes.empty()) return absl::OkStatus();  // truncated under us
      if (!reply.Write(bytes)) return absl::OkStatus();
      pos += static_cast<int64_t>(bytes.size());
      budget -= static_cast<int64_t>(bytes.size());
      if (budget == 0) return absl::OkStatus();
      continue;
    }
    if (run.end) return absl::OkStatus();
    if (reply.Gone(poll)) return absl::OkStatus();
  }
}

}  // namespace

absl::StatusOr<ContainerLogOptions> ParseContainerLogOptions(
    const std::map<std::string, std::string>& query) {
  ContainerLogOptions o;
  absl::StatusOr<bool> follow = ParseBool(query, "follow");
  if (!follow.ok()) return follow.status();
  o.follow = *follow;
  absl::StatusOr<bool> previous = ParseBool(query, "previous");
  if (!previous.ok()) return previous.status();
  o.previous = *previous;
  absl::StatusOr<bool> timestamps = ParseBool(query, "timestamps");
  if (!timestamps.ok()) return timestamps.status();
  if (*timestamps || query.count("sinceSeconds") || query.count("sinceTime")) {
    return absl::InvalidArgumentError(
        "timestamps, sinceSeconds and sinceTime are not supported by kubetrain-node-agent: it "
        "keeps no time per line");
  }
  absl::StatusOr<std::optional<int64_t>> tail = ParseInt(query, "tailLines", 0);
  if (!tail.ok()) return tail.status();
  o.tail_lines = *tail;
  absl::StatusOr<std::optional<int64_t>> limit = ParseInt(query, "limitBytes", 1);
  if (!limit.ok()) return limit.status();
  o.limit_bytes = *limit;
  return o;
}

void HandleKubeletRequest(const std::string& logs_dir, const kube::HttpsRequest& request,
                          kube::HttpsReply& reply, absl::Duration poll) {
  if (request.method != "GET") {
    reply.Fail(405, "405: Method Not Allowed\n");
    return;
  }
  if (request.path == "/healthz") {
    reply.Write("ok");
    return;
  }
  std::vector<std::string> segs = absl::StrSplit(request.path, '/', absl::SkipEmpty());
  if (segs.empty() || segs[0] != "containerLogs") {
    reply.Fail(404, "404 page not found\n");
    return;
  }
  if (segs.size() == 3) {
    reply.Fail(400, "{\"message\": \"Missing container name.\"}");
    return;
  }
  if (segs.size() != 4) {
    reply.Fail(404, "404 page not found\n");
    return;
  }
  absl::StatusOr<ContainerLogOptions> options = ParseContainerLogOptions(request.query);
  absl::Status s = options.status();
  if (s.ok()) s = ServeContainerLogs(logs_dir, segs[1], segs[2], segs[3], *options, reply, poll);
  if (s.ok()) return;
  reply.Fail(s.code() == absl::StatusCode::kNotFound ? 404 : 400, std::string(s.message()));
}

}  // namespace kubetrain::node_agent
