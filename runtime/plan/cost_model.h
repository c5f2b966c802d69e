// The cost model behind docs/scaling.md and `kubetrain plan`: a synchronous
// step is compute plus the exchange time compute does not hide, with each
// exchange an alpha-beta model of what kubetrain's code does on the wire:
//
// - Ring allreduce (runtime/exchange/allreduce/ring_allreduce.h): per
//   bucket, N-1 reduce-scatter and N-1 all-gather steps, each moving S/N
//   bytes each way over every host's link:
//     ring(S) = 2(N-1)/N * S/B + 2(N-1) * alpha   (summed over the buckets).
//   Buckets after the first fill while backward runs, so up to the backward
//   time of the exchange hides behind it; the last bucket never does.
// - Parameter servers, sync (runtime/exchange/ps/): every worker pushes its
//   S bytes split over k shards, each shard's link takes N*S/k, then every
//   worker pulls the same back: one phase is max(S, N*S/k)/B, a step two of
//   them plus two round trips (4 alpha). Pipelined (`--ps-pipeline`), the
//   pull streams back while pushes still arrive: about one phase.
// - In-pod GPUs (`--gpus G`): a NCCL ring over the pod's G GPUs at the
//   intra-node bandwidth first, then the cross-pod exchange between pods;
//   such a pod averages after backward, so none of its exchange hides.
//
// alpha is one-way latency per message; B is the payload bandwidth of one
// direction of one host's link (a NIC is full duplex). S is the gradient's
// bytes on the wire (fp16 halves it). Efficiency is weak scaling: the
// throughput of N workers over N times one worker's, that is compute / step.
// When the hosts share a machine's cores (the shaped test hosts of
// scripts/test-hosts.sh), workers in lockstep compute at the same time, so
// compute stretches by max(1, workers / cores).
//
// Pure functions; thread-safe.
#ifndef KUBETRAIN_RUNTIME_PLAN_COST_MODEL_H_
#define KUBETRAIN_RUNTIME_PLAN_COST_MODEL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace kubetrain::plan {

// One direction of one host's link.
struct Link {
  double alpha_seconds = 25e-6;  // one-way latency per message
  double bytes_per_second = 0;   // payload bandwidth
};

struct Workload {
  int64_t num_params = 0;
  int bytes_per_value = 4;      // 4 fp32, 2 fp16 (--wire-dtype)
  double compute_seconds = 0;   // one worker's step alone (forward, backward, update)
  double backward_share = 0.6;  // of compute, during which buckets can be sent
};

enum class Algorithm { kRing, kPs };

struct Cluster {
  Algorithm algorithm = Algorithm::kRing;
  int workers = 1;                 // pods that exchange (each a replica of the model)
  int ps_shards = 1;               // kPs: shards, each on a host of its own
  bool ps_pipelined = false;       // kPs: --ps-pipeline
  double bucket_bytes = 25 << 20;  // kRing: --bucket-mb
  int gpus_per_pod = 1;            // --gpus: replicas averaged in the pod first
  Link intra_pod{10e-6, 150e9};    // the pod's GPUs (NVLink-class, stated assumption)
  int shared_cores = 0;            // > 0: every host shares these cores (test hosts)
};

struct Prediction {
  double compute_seconds = 0;   // after core sharing
  double in_pod_seconds = 0;    // the in-pod NCCL average (gpus_per_pod > 1)
  double exchange_seconds = 0;  // the cross-pod exchange, whole
  double exposed_seconds = 0;   // the part compute does not hide
  double step_seconds = 0;
  double efficiency = 0;  // one worker alone / step
};

// Seconds of a ring allreduce of `bytes` over `ranks` (one bucket).
double RingAllreduceSeconds(int ranks, double bytes, const Link& link);

// Seconds of one sync PS step's exchange: `workers` each move `bytes`
// through `shards` shards.
double PsExchangeSeconds(int workers, int shards, double bytes, const Link& link, bool pipelined);

// Checks the inputs (positive sizes and rates) and predicts a step.
absl::StatusOr<Prediction> Predict(const Workload& w, const Cluster& c, const Link& link);

// The ring bucket (1 MiB, doubling, up to the whole gradient) with the
// shortest predicted step: smaller buckets hide more behind backward but
// pay 2(N-1) latencies each.
double RecommendedBucketBytes(const Workload& w, const Cluster& c, const Link& link);

// The fewest PS shards whose predicted step is within 5 % of what any
// number of shards up to max(workers, 1) gives.
int RecommendedPsShards(const Workload& w, const Cluster& c, const Link& link);

// Parses a tc-style rate: "100mbit", "25gbit", "500kbit", "1.5gbit" (bits
// per second) into bytes per second.
absl::StatusOr<double> ParseRate(const std::string& text);

}  // namespace kubetrain::plan

#endif  // KUBETRAIN_RUNTIME_PLAN_COST_MODEL_H_
