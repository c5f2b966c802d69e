// `kubetrain plan`: what the cost model (cost_model.h) predicts for a model
// on a link, at several world sizes, for the ring and for parameter servers,
// with the bucket size and shard count it recommends. The model is a
// built-in or spec file (its parameters counted on the CPU, 28x28x1 inputs
// unless the spec says) or a bare parameter count (--params).
#ifndef KUBETRAIN_RUNTIME_PLAN_PLAN_COMMAND_H_
#define KUBETRAIN_RUNTIME_PLAN_PLAN_COMMAND_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kubetrain::plan {

struct PlanOptions {
  std::string model = "mlp";          // built-in name or spec file; ignored with params > 0
  int64_t params = 0;                 // > 0: the model's parameter count
  double step_ms = 0;                 // one worker's step alone, required
  std::vector<int> workers{2, 4, 8};  // replicas (GPUs), multiples of gpus_per_pod
  std::vector<int> ps_shards;         // empty: 1 and the recommended count
  std::string algorithms = "ring,ps";
  int gpus_per_pod = 1;
  std::string link = "25gbit";
  double alpha_us = 25;
  std::string wire_dtype = "fp32";
  double bucket_mb = 0;  // 0: the recommended size
  bool ps_pipeline = false;
  int shared_cores = 0;
  std::string format = "table";  // table or csv
};

// Prints the plan; InvalidArgument on bad options (nothing printed).
absl::Status RunPlan(const PlanOptions& o, std::ostream& out);

}  // namespace kubetrain::plan

#endif  // KUBETRAIN_RUNTIME_PLAN_PLAN_COMMAND_H_
