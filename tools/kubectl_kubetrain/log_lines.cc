#include "tools/kubectl_kubetrain/log_lines.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "operator/kube/object.h"

namespace kubetrain::kubectl_plugin {

std::string LogPrefix(const ReplicaRef& replica, int restart) {
  return absl::StrCat("[", ReplicaName(replica), " r", restart, "] ");
}

TimedLine SplitTimestamp(absl::string_view line) {
  const size_t space = line.find(' ');
  // The shortest RFC 3339 time is "2006-01-02T15:04:05Z" (20 characters).
  if (space != absl::string_view::npos && space >= 20 && line[4] == '-' && line[10] == 'T') {
    std::optional<int64_t> micros = kube::ParseTimeMicros(line.substr(0, space));
    if (micros) return TimedLine{micros, std::string(line.substr(space + 1))};
  }
  return TimedLine{std::nullopt, std::string(line)};
}

std::string MergeLogs(const std::vector<ReplicaLog>& logs) {
  struct Entry {
    int64_t micros;
    size_t log;
    size_t line;
    std::string text;
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < logs.size(); ++i) {
    absl::string_view body = logs[i].text;
    if (!body.empty() && body.back() == '\n') body.remove_suffix(1);
    if (body.empty()) continue;
    int64_t last = INT64_MIN;
    size_t n = 0;
    for (absl::string_view raw : absl::StrSplit(body, '\n')) {
      if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
      TimedLine timed = SplitTimestamp(raw);
      // Times within one log never go back: a line without one, or with an
      // earlier one, stays after its predecessor.
      if (timed.unix_micros && *timed.unix_micros > last) last = *timed.unix_micros;
      entries.push_back(Entry{last, i, n++, absl::StrCat(logs[i].prefix, timed.text)});
    }
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.micros, a.log, a.line) < std::tie(b.micros, b.log, b.line);
  });
  std::string out;
  for (const Entry& e : entries) absl::StrAppend(&out, e.text, "\n");
  return out;
}

}  // namespace kubetrain::kubectl_plugin
