#include "runtime/plan/plan_command.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "runtime/nn/model_spec.h"
#include "runtime/plan/cost_model.h"

namespace kubetrain::plan {
namespace {

struct Row {
  int workers = 0;
  Algorithm algorithm = Algorithm::kRing;
  int shards = 0;
  double bucket_bytes = 0;
  Prediction p;
};

}  // namespace

absl::Status RunPlan(const PlanOptions& o, std::ostream& out) {
  Workload w;
  std::string what;
  if (o.params > 0) {
    w.num_params = o.params;
    what = absl::StrCat(o.params, " params");
  } else {
    absl::StatusOr<std::unique_ptr<nn::Model>> model = nn::LoadModel(o.model, Shape{28, 28, 1});
    if (!model.ok()) return model.status();
    w.num_params = (*model)->num_params();
    what = absl::StrCat("model ", o.model, " (", w.num_params, " params)");
  }
  if (o.wire_dtype != "fp32" && o.wire_dtype != "fp16") {
    return absl::InvalidArgumentError("--wire-dtype must be fp32 or fp16");
  }
  w.bytes_per_value = o.wire_dtype == "fp16" ? 2 : 4;
  if (!(o.step_ms > 0)) {
    return absl::InvalidArgumentError(
        "--step-ms: one worker's step time alone, in milliseconds (the samples/s of "
        "`kubetrain train` on one device: step = batch / samples per second)");
  }
  w.compute_seconds = o.step_ms / 1e3;
  absl::StatusOr<double> rate = ParseRate(o.link);
  if (!rate.ok()) return rate.status();
  Link link{o.alpha_us * 1e-6, *rate};
  const bool ring = absl::StrContains(o.algorithms, "ring");
  const bool ps = absl::StrContains(o.algorithms, "ps");
  for (absl::string_view a : absl::StrSplit(o.algorithms, ',')) {
    if (a != "ring" && a != "ps") {
      return absl::InvalidArgumentError(absl::StrCat("--algorithms: unknown '", a, "' (ring, ps)"));
    }
  }
  if (o.workers.empty()) return absl::InvalidArgumentError("--workers: at least one size");
  if (o.format != "table" && o.format != "csv") {
    return absl::InvalidArgumentError("--format must be table or csv");
  }
  if (o.bucket_mb < 0) return absl::InvalidArgumentError("--bucket-mb must be >= 0");

  const double gradient_bytes = static_cast<double>(w.num_params) * w.bytes_per_value;
  std::vector<Row> rows;
  std::vector<std::string> advice;
  for (int n : o.workers) {
    if (n < 1 || n % o.gpus_per_pod != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--workers ", n, ": every world size must be a positive multiple of --gpus-per-pod ",
          o.gpus_per_pod));
    }
    Cluster c;
    c.workers = n / o.gpus_per_pod;  // the pods exchange; their GPUs average first
    c.gpus_per_pod = o.gpus_per_pod;
    c.shared_cores = o.shared_cores;
    c.ps_pipelined = o.ps_pipeline;
    if (ring) {
      c.algorithm = Algorithm::kRing;
      const double recommended = RecommendedBucketBytes(w, c, link);
      c.bucket_bytes = o.bucket_mb > 0 ? o.bucket_mb * (1 << 20) : recommended;
      absl::StatusOr<Prediction> p = Predict(w, c, link);
      if (!p.ok()) return p.status();
      rows.push_back({n, Algorithm::kRing, 0, c.bucket_bytes, *p});
      advice.push_back(
          absl::StrFormat("%d workers, ring: --bucket-mb %.1f (the shortest predicted step)", n,
                          recommended / (1 << 20)));
    }
    if (ps) {
      const int best = RecommendedPsShards(w, c, link);  // at most the pods
      std::vector<int> shards = o.ps_shards;
      if (shards.empty()) shards = best == 1 ? std::vector<int>{1} : std::vector<int>{1, best};
      for (int k : shards) {
        c.algorithm = Algorithm::kPs;
        c.ps_shards = k;
        absl::StatusOr<Prediction> p = Predict(w, c, link);
        if (!p.ok()) return p.status();
        rows.push_back({n, Algorithm::kPs, k, 0, *p});
      }
      advice.push_back(absl::StrFormat(
          "%d workers, PS: %d shard(s) on hosts of their own (more gain < 5%%)", n, best));
    }
  }

  if (o.format == "csv") {
    out << "workers,pods,algorithm,shards,bucket_mb,compute_ms,in_pod_ms,exchange_ms,exposed_ms,"
           "step_ms,efficiency\n";
    for (const Row& r : rows) {
      out << absl::StrFormat(
          "%d,%d,%s,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.4f\n", r.workers, r.workers / o.gpus_per_pod,
          r.algorithm == Algorithm::kRing ? "ring" : "ps", r.shards, r.bucket_bytes / (1 << 20),
          r.p.compute_seconds * 1e3, r.p.in_pod_seconds * 1e3, r.p.exchange_seconds * 1e3,
          r.p.exposed_seconds * 1e3, r.p.step_seconds * 1e3, r.p.efficiency);
    }
    return absl::OkStatus();
  }
  out << absl::StrFormat(
      "kubetrain plan: %s, %.1f MiB of %s gradients per step, %.2f ms per step alone\n"
      "link %s each way (%.0f MB/s), latency %.0f us%s%s\n",
      what, gradient_bytes / (1 << 20), o.wire_dtype, o.step_ms, o.link,
      link.bytes_per_second / 1e6, o.alpha_us,
      o.gpus_per_pod > 1 ? absl::StrCat(", ", o.gpus_per_pod, " GPUs per pod") : "",
      o.shared_cores > 0 ? absl::StrCat(", hosts sharing ", o.shared_cores, " cores") : "");
  out << absl::StrFormat("%8s %6s  %-10s %9s %10s %11s %10s %9s %10s\n", "workers", "pods",
                         "exchange", "bucket", "compute", "exchange", "exposed", "step",
                         "efficiency");
  for (const Row& r : rows) {
    const std::string name =
        r.algorithm == Algorithm::kRing ? std::string("ring") : absl::StrCat("ps k=", r.shards);
    out << absl::StrFormat("%8d %6d  %-10s %9s %8.2fms %9.2fms %8.2fms %7.2fms %9.0f%%\n",
                           r.workers, r.workers / o.gpus_per_pod, name,
                           r.algorithm == Algorithm::kRing
                               ? absl::StrFormat("%.1fMiB", r.bucket_bytes / (1 << 20))
                               : std::string("-"),
                           r.p.compute_seconds * 1e3, r.p.exchange_seconds * 1e3,
                           r.p.exposed_seconds * 1e3, r.p.step_seconds * 1e3, r.p.efficiency * 100);
  }
  out << "recommended:\n";
  for (const std::string& a : advice) out << "  " << a << "\n";
  return absl::OkStatus();
}

}  // namespace kubetrain::plan
