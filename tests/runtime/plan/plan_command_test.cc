#include "runtime/plan/plan_command.h"

#include <gtest/gtest.h>

#include <sstream>

#include "absl/strings/str_split.h"
#include "runtime/plan/cost_model.h"

namespace kubetrain::plan {
namespace {

TEST(PlanCommand, CsvRowsAreTheModelsPredictions) {
  PlanOptions o;
  o.model = "mlp";
  o.step_ms = 5;
  o.workers = {4};
  o.ps_shards = {2};
  o.link = "100mbit";
  o.alpha_us = 50;
  o.bucket_mb = 64;
  o.format = "csv";
  std::ostringstream out;
  ASSERT_TRUE(RunPlan(o, out).ok());
  std::vector<std::string> lines = absl::StrSplit(out.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_EQ(lines[0].rfind("workers,pods,algorithm,shards,", 0), 0u);
  // mlp: 235,146 parameters (the built-in model), fp32.
  Workload w;
  w.num_params = 235146;
  w.compute_seconds = 0.005;
  Cluster c;
  c.workers = 4;
  c.bucket_bytes = 64 << 20;
  const Link link{50e-6, 12.5e6};
  const Prediction ring = *Predict(w, c, link);
  c.algorithm = Algorithm::kPs;
  c.ps_shards = 2;
  const Prediction ps = *Predict(w, c, link);
  std::vector<std::string> r = absl::StrSplit(lines[1], ',');
  ASSERT_EQ(r.size(), 11u);
  EXPECT_EQ(r[2], "ring");
  EXPECT_NEAR(std::stod(r[9]), ring.step_seconds * 1e3, 1e-3);
  std::vector<std::string> p = absl::StrSplit(lines[2], ',');
  EXPECT_EQ(p[2], "ps");
  EXPECT_EQ(p[3], "2");
  EXPECT_NEAR(std::stod(p[9]), ps.step_seconds * 1e3, 1e-3);
}

TEST(PlanCommand, TableNamesTheRecommendations) {
  PlanOptions o;
  o.params = 25'600'000;
  o.step_ms = 80;
  o.workers = {8, 64};
  o.gpus_per_pod = 8;
  o.wire_dtype = "fp16";
  std::ostringstream out;
  ASSERT_TRUE(RunPlan(o, out).ok());
  EXPECT_NE(out.str().find("48.8 MiB of fp16 gradients"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("64 workers, ring: --bucket-mb"), std::string::npos);
  EXPECT_NE(out.str().find("64 workers, PS:"), std::string::npos);
}

TEST(PlanCommand, BadOptionsPrintNothing) {
  for (auto change : std::vector<void (*)(PlanOptions&)>{
           [](PlanOptions& o) { o.step_ms = 0; },
           [](PlanOptions& o) { o.link = "fast"; },
           [](PlanOptions& o) { o.wire_dtype = "int8"; },
           [](PlanOptions& o) { o.algorithms = "ring,tree"; },
           [](PlanOptions& o) { o.model = "no-such-model"; },
           [](PlanOptions& o) { o.gpus_per_pod = 8; },  // 2, 4 are not multiples of 8
           [](PlanOptions& o) { o.format = "xml"; },
       }) {
    PlanOptions o;
    o.step_ms = 5;
    change(o);
    std::ostringstream out;
    absl::Status s = RunPlan(o, out);
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(out.str().empty()) << out.str();
  }
}

}  // namespace
}  // namespace kubetrain::plan
