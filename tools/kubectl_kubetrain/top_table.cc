#include "tools/kubectl_kubetrain/top_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kubetrain::kubectl_plugin {
namespace {

bool Trains(const ReplicaRef& r) { return r.type == "chief" || r.type == "worker"; }

bool Waits(const ReplicaMetrics& m) {
  return (m.stall_seconds && *m.stall_seconds > 0) || (m.stalled_peers && *m.stalled_peers > 0);
}

std::string Or(const std::optional<std::string>& v) { return v ? *v : "-"; }

}  // namespace

std::vector<std::string> WaitsFor(const std::vector<TopRow>& rows, size_t i) {
  const TopRow& row = rows[i];
  if (!row.metrics || !Waits(*row.metrics)) return {};
  std::vector<std::string> silent;
  std::vector<std::string> behind;
  for (size_t j = 0; j < rows.size(); ++j) {
    if (j == i) continue;
    const TopRow& other = rows[j];
    if (!other.metrics) {
      silent.push_back(ReplicaName(other.replica));
    } else if (Trains(row.replica) && Trains(other.replica) && row.metrics->step &&
               other.metrics->step && *other.metrics->step < *row.metrics->step) {
      behind.push_back(ReplicaName(other.replica));
    }
  }
  if (!silent.empty()) return silent;
  if (!behind.empty()) return behind;
  const int peers = row.metrics->stalled_peers.value_or(0);
  if (peers > 0) return {absl::StrCat(peers, peers == 1 ? " peer" : " peers")};
  return {"?"};
}

std::string RenderTopTable(const std::vector<TopRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  cells.push_back(
      {"REPLICA", "POD", "RESTARTS", "STEP", "SAMPLES/S", "EXCHANGE", "STALL", "WAITS-FOR"});
  for (size_t i = 0; i < rows.size(); ++i) {
    const TopRow& row = rows[i];
    std::vector<std::string> line = {ReplicaName(row.replica), row.pod, absl::StrCat(row.restarts)};
    if (!row.metrics) {
      line.insert(line.end(), {"-", "-", "-", "-", absl::StrCat("(", row.problem, ")")});
    } else {
      const ReplicaMetrics& m = *row.metrics;
      line.push_back(Or(m.step ? std::optional<std::string>(absl::StrCat(*m.step)) : std::nullopt));
      line.push_back(Or(m.samples_per_second ? std::optional<std::string>(
                                                   absl::StrFormat("%.1f", *m.samples_per_second))
                                             : std::nullopt));
      line.push_back(Or(m.exchange_share ? std::optional<std::string>(absl::StrFormat(
                                               "%.0f%%%s", *m.exchange_share * 100,
                                               m.exchange_share_since_start ? "*" : ""))
                                         : std::nullopt));
      line.push_back(Or(m.stall_seconds
                            ? std::optional<std::string>(absl::StrFormat("%.0fs", *m.stall_seconds))
                            : std::nullopt));
      std::vector<std::string> waits = WaitsFor(rows, i);
      line.push_back(waits.empty() ? "-" : absl::StrJoin(waits, ","));
    }
    cells.push_back(std::move(line));
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& line : cells) {
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      if (c + 1 == line.size()) {
        absl::StrAppend(&text, line[c]);
      } else {
        absl::StrAppend(&text, line[c], std::string(width[c] - line[c].size() + 2, ' '));
      }
    }
    absl::StrAppend(&out, text, "\n");
  }
  return out;
}

}  // namespace kubetrain::kubectl_plugin
