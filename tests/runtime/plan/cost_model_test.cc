#include "runtime/plan/cost_model.h"

#include <gtest/gtest.h>

namespace kubetrain::plan {
namespace {

constexpr double kMB = 1e6;

TEST(CostModel, RingIsTwoNMinusOneOverNBytesOverBandwidthPlusLatencies) {
  const Link link{100e-6, 100 * kMB};
  // 4 ranks, 8 MB: 2*3/4 * 8 MB / 100 MB/s = 0.12 s, plus 6 latencies.
  EXPECT_DOUBLE_EQ(RingAllreduceSeconds(4, 8 * kMB, link), 0.12 + 6 * 100e-6);
  EXPECT_EQ(RingAllreduceSeconds(1, 8 * kMB, link), 0);  // a world of one moves nothing
  // The bandwidth term tends to 2 S/B as N grows; the latency term grows with N.
  EXPECT_LT(RingAllreduceSeconds(64, 8 * kMB, Link{0, 100 * kMB}), 2 * 8 * kMB / (100 * kMB));
  EXPECT_GT(RingAllreduceSeconds(64, 8 * kMB, Link{0, 100 * kMB}), 1.9 * 8 * kMB / (100 * kMB));
}

TEST(CostModel, PsIsBoundByTheBusierOfTheWorkerAndShardLinks) {
  const Link link{0, 100 * kMB};
  // 4 workers, 1 shard: the shard's link carries 4 x 8 MB each way.
  EXPECT_DOUBLE_EQ(PsExchangeSeconds(4, 1, 8 * kMB, link, false), 2 * 0.32);
  // 4 shards: each takes 4 x 2 MB, as much as a worker's own 8 MB.
  EXPECT_DOUBLE_EQ(PsExchangeSeconds(4, 4, 8 * kMB, link, false), 2 * 0.08);
  // More shards than workers: the worker's link is the bound.
  EXPECT_DOUBLE_EQ(PsExchangeSeconds(4, 8, 8 * kMB, link, false), 2 * 0.08);
  // Pipelined: the pull overlaps the push, one phase.
  EXPECT_DOUBLE_EQ(PsExchangeSeconds(4, 4, 8 * kMB, link, true), 0.08);
  // Two round trips of latency.
  EXPECT_DOUBLE_EQ(PsExchangeSeconds(1, 1, 8 * kMB, Link{1e-3, 100 * kMB}, false), 0.16 + 4e-3);
}

TEST(CostModel, PredictAddsComputeAndTheExposedExchange) {
  Workload w;
  w.num_params = 2'000'000;  // 8 MB fp32
  w.compute_seconds = 0.05;
  w.backward_share = 0.6;
  Cluster c;
  c.workers = 4;
  c.bucket_bytes = 64 * kMB;  // one bucket: nothing hides
  const Link link{0, 100 * kMB};
  absl::StatusOr<Prediction> p = Predict(w, c, link);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->exchange_seconds, 0.12);
  EXPECT_DOUBLE_EQ(p->exposed_seconds, 0.12);
  EXPECT_DOUBLE_EQ(p->step_seconds, 0.17);
  EXPECT_DOUBLE_EQ(p->efficiency, 0.05 / 0.17);

  // Four buckets: three of the four 0.03 s allreduces can hide behind the
  // 0.03 s of backward; the last cannot.
  c.bucket_bytes = 2 * kMB;
  p = Predict(w, c, link);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->exposed_seconds, 0.12 - 0.03, 1e-12);

  // fp16 halves the bytes.
  w.bytes_per_value = 2;
  c.bucket_bytes = 64 * kMB;
  p = Predict(w, c, link);
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->exchange_seconds, 0.06);
}

TEST(CostModel, HostsSharingCoresStretchComputeInLockstep) {
  Workload w;
  w.num_params = 1000;
  w.compute_seconds = 0.01;
  Cluster c;
  c.workers = 8;
  c.shared_cores = 2;
  absl::StatusOr<Prediction> p = Predict(w, c, Link{0, 1e9});
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->compute_seconds, 0.04);
  c.workers = 1;
  p = Predict(w, c, Link{0, 1e9});
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->compute_seconds, 0.01);
}

TEST(CostModel, PodsOfSeveralGpusAverageFirstAndHideNothing) {
  Workload w;
  w.num_params = 25'000'000;
  w.compute_seconds = 0.1;
  Cluster c;
  c.workers = 8;
  c.gpus_per_pod = 8;
  c.bucket_bytes = 1 << 20;
  absl::StatusOr<Prediction> p = Predict(w, c, Link{25e-6, 3.125e9});
  ASSERT_TRUE(p.ok());
  EXPECT_GT(p->in_pod_seconds, 0);
  EXPECT_DOUBLE_EQ(p->exposed_seconds, p->exchange_seconds);
}

TEST(CostModel, RefusesInputsThatMeanNothing) {
  Workload w;
  w.num_params = 10;
  w.compute_seconds = 0.01;
  Cluster c;
  const Link link{0, 1e6};
  Workload bad = w;
  bad.num_params = 0;
  EXPECT_EQ(Predict(bad, c, link).status().code(), absl::StatusCode::kInvalidArgument);
  bad = w;
  bad.compute_seconds = 0;
  EXPECT_EQ(Predict(bad, c, link).status().code(), absl::StatusCode::kInvalidArgument);
  bad = w;
  bad.bytes_per_value = 3;
  EXPECT_EQ(Predict(bad, c, link).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Predict(w, c, Link{0, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  Cluster no_workers = c;
  no_workers.workers = 0;
  EXPECT_EQ(Predict(w, no_workers, link).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CostModel, RecommendsTheBucketWithTheShortestStep) {
  Workload w;
  w.num_params = 25'000'000;  // 100 MB
  w.compute_seconds = 0.1;
  Cluster c;
  c.workers = 8;
  const Link link{25e-6, 3.125e9};
  const double bucket = RecommendedBucketBytes(w, c, link);
  c.bucket_bytes = bucket;
  const double best = Predict(w, c, link)->step_seconds;
  for (double b : {1.0 * (1 << 20), 8.0 * (1 << 20), 100e6}) {
    c.bucket_bytes = b;
    EXPECT_LE(best, Predict(w, c, link)->step_seconds + 1e-12) << b;
  }
  // With latency dominating (a tiny gradient), one bucket.
  w.num_params = 1000;
  c.bucket_bytes = 0;
  EXPECT_DOUBLE_EQ(RecommendedBucketBytes(w, c, Link{1e-3, 1e9}), 4000);
}

TEST(CostModel, RecommendsShardsUntilTheWorkersLinkIsTheBound) {
  Workload w;
  w.num_params = 2'500'000;
  w.compute_seconds = 0.001;
  Cluster c;
  c.workers = 4;
  // With no latency, 4 shards make every shard link carry what a worker's
  // does; more change nothing, fewer are slower.
  EXPECT_EQ(RecommendedPsShards(w, c, Link{0, 100 * kMB}), 4);
  c.workers = 1;
  EXPECT_EQ(RecommendedPsShards(w, c, Link{0, 100 * kMB}), 1);
}

TEST(CostModel, ParsesRatesAsTcWrites) {
  EXPECT_DOUBLE_EQ(*ParseRate("100mbit"), 12.5e6);
  EXPECT_DOUBLE_EQ(*ParseRate("25Gbit"), 25e9 / 8);
  EXPECT_DOUBLE_EQ(*ParseRate("1.5gbit"), 1.5e9 / 8);
  EXPECT_DOUBLE_EQ(*ParseRate("800kbit"), 1e5);
  EXPECT_EQ(ParseRate("fast").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRate("10mb").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRate("0gbit").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRate("").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kubetrain::plan
