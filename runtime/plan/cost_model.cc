#include "runtime/plan/cost_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::plan {

double RingAllreduceSeconds(int ranks, double bytes, const Link& link) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double n = ranks;
  return 2 * (n - 1) / n * bytes / link.bytes_per_second + 2 * (n - 1) * link.alpha_seconds;
}

double PsExchangeSeconds(int workers, int shards, double bytes, const Link& link, bool pipelined) {
  if (workers < 1 || shards < 1 || bytes <= 0) return 0;
  // The busier of a worker's link (its S) and a shard's (N workers' S/k).
  const double phase = std::max(bytes, workers * bytes / shards) / link.bytes_per_second;
  return (pipelined ? phase : 2 * phase) + 4 * link.alpha_seconds;
}

namespace {

// Ring allreduce of the whole gradient in buckets of `bucket` bytes; `last`
// gets the last bucket's share, which backward cannot hide.
double BucketedRing(int ranks, double bytes, double bucket, const Link& link, double* last) {
  const double buckets = std::max(1.0, std::ceil(bytes / bucket));
  const double per = bytes / buckets;
  const double one = RingAllreduceSeconds(ranks, per, link);
  *last = one;
  return one * buckets;
}

}  // namespace

absl::StatusOr<Prediction> Predict(const Workload& w, const Cluster& c, const Link& link) {
  if (w.num_params <= 0) return absl::InvalidArgumentError("the model has no parameters");
  if (w.bytes_per_value != 2 && w.bytes_per_value != 4) {
    return absl::InvalidArgumentError("bytes per value must be 2 (fp16) or 4 (fp32)");
  }
  if (!(w.compute_seconds > 0)) {
    return absl::InvalidArgumentError("the step's compute time must be positive");
  }
  if (c.workers < 1) return absl::InvalidArgumentError("at least one worker");
  if (c.algorithm == Algorithm::kPs && c.ps_shards < 1) {
    return absl::InvalidArgumentError("at least one PS shard");
  }
  if (!(link.bytes_per_second > 0) || link.alpha_seconds < 0) {
    return absl::InvalidArgumentError("the link needs a positive rate and a latency >= 0");
  }
  if (c.algorithm == Algorithm::kRing && !(c.bucket_bytes > 0)) {
    return absl::InvalidArgumentError("the bucket size must be positive");
  }
  if (c.gpus_per_pod < 1) return absl::InvalidArgumentError("at least one GPU per pod");

  Prediction p;
  p.compute_seconds = w.compute_seconds;
  if (c.shared_cores > 0) {
    p.compute_seconds *= std::max(1.0, static_cast<double>(c.workers) / c.shared_cores);
  }
  const double bytes = static_cast<double>(w.num_params) * w.bytes_per_value;
  // The pod's replicas average over NCCL (fp32 on the device) before the
  // pod exchanges; nothing hides it (it runs after backward).
  if (c.gpus_per_pod > 1) {
    p.in_pod_seconds = RingAllreduceSeconds(c.gpus_per_pod, w.num_params * 4.0, c.intra_pod);
  }
  double hidden = 0;
  if (c.algorithm == Algorithm::kRing) {
    double last = 0;
    p.exchange_seconds = BucketedRing(c.workers, bytes, c.bucket_bytes, link, &last);
    // Every bucket but the last can run while backward fills the next;
    // a pod of several GPUs exchanges only after its replicas' backward and
    // their average (runtime/train/trainer.cc), so it hides nothing.
    const double backward = c.gpus_per_pod > 1 ? 0 : w.backward_share * p.compute_seconds;
    hidden = std::min(p.exchange_seconds - last, backward);
  } else {
    p.exchange_seconds = PsExchangeSeconds(c.workers, c.ps_shards, bytes, link, c.ps_pipelined);
  }
  p.exposed_seconds = p.exchange_seconds - std::max(0.0, hidden);
  p.step_seconds = p.compute_seconds + p.in_pod_seconds + p.exposed_seconds;
  p.efficiency = w.compute_seconds / p.step_seconds;
  return p;
}

double RecommendedBucketBytes(const Workload& w, const Cluster& c, const Link& link) {
  const double gradient = static_cast<double>(w.num_params) * w.bytes_per_value;
  Cluster probe = c;
  probe.algorithm = Algorithm::kRing;
  double best_bucket = std::max(gradient, 1.0), best_step = 0;
  for (double b = 1 << 20;; b *= 2) {
    probe.bucket_bytes = std::min(b, std::max(gradient, 1.0));
    absl::StatusOr<Prediction> p = Predict(w, probe, link);
    // Strictly better only: of equal steps the larger bucket (fewer messages).
    if (p.ok() && (best_step == 0 || p->step_seconds < best_step * (1 - 1e-9))) {
      best_step = p->step_seconds;
      best_bucket = probe.bucket_bytes;
    }
    if (b >= gradient) break;
  }
  return best_bucket;
}

int RecommendedPsShards(const Workload& w, const Cluster& c, const Link& link) {
  Cluster probe = c;
  probe.algorithm = Algorithm::kPs;
  const int most = std::max(c.workers, 1);
  double best = 0;
  std::vector<double> steps;
  for (int k = 1; k <= most; ++k) {
    probe.ps_shards = k;
    absl::StatusOr<Prediction> p = Predict(w, probe, link);
    const double s = p.ok() ? p->step_seconds : 0;
    steps.push_back(s);
    if (p.ok() && (best == 0 || s < best)) best = s;
  }
  for (int k = 1; k <= most; ++k) {
    if (steps[k - 1] > 0 && steps[k - 1] <= best * 1.05) return k;
  }
  return 1;
}

absl::StatusOr<double> ParseRate(const std::string& text) {
  const std::string t = absl::AsciiStrToLower(text);
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  double number = 0;
  if (i == 0 || !absl::SimpleAtod(t.substr(0, i), &number) || !(number > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rate '", text, "': expected a positive number then kbit, mbit or gbit"));
  }
  const std::string unit = t.substr(i);
  double bits = 0;
  if (unit == "gbit") {
    bits = number * 1e9;
  } else if (unit == "mbit") {
    bits = number * 1e6;
  } else if (unit == "kbit") {
    bits = number * 1e3;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("rate '", text, "': the unit must be kbit, mbit or gbit"));
  }
  return bits / 8;
}

}  // namespace kubetrain::plan
