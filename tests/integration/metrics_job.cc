#include "tests/integration/metrics_job.h"

#include <signal.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/launcher/loopback_ports.h"
#include "tests/support/idx_test_util.h"
#include "tests/support/metrics_test_util.h"

namespace kubetrain::testing_util {
namespace {

using data::testing_util::IdxBytes;
using data::testing_util::WriteGz;

// Class c images are bright in row band c: learnable, and tiny.
void WriteDataset(const data::testing_util::TempDir& dir, int train, int test) {
  auto images = [](int n) {
    std::vector<uint8_t> px(static_cast<size_t>(n) * 784, 0);
    for (int i = 0; i < n; ++i) {
      const int c = i % 10;
      for (int r = c * 2; r < c * 2 + 3; ++r) {
        for (int col = 0; col < 28; ++col) px[static_cast<size_t>(i) * 784 + r * 28 + col] = 200;
      }
    }
    return px;
  };
  auto labels = [](int n) {
    std::vector<uint8_t> l(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) l[static_cast<size_t>(i)] = static_cast<uint8_t>(i % 10);
    return l;
  };
  const auto u = [](int n) { return static_cast<uint32_t>(n); };
  WriteGz(dir.File("train-images-idx3-ubyte.gz"), IdxBytes({u(train), 28, 28}, images(train)));
  WriteGz(dir.File("train-labels-idx1-ubyte.gz"), IdxBytes({u(train)}, labels(train)));
  WriteGz(dir.File("t10k-images-idx3-ubyte.gz"), IdxBytes({u(test), 28, 28}, images(test)));
  WriteGz(dir.File("t10k-labels-idx1-ubyte.gz"), IdxBytes({u(test)}, labels(test)));
}

std::string Key(const std::string& type, int index) { return absl::StrCat(type, "-", index); }

}  // namespace

MetricsJob::MetricsJob(int num_ps)
    : num_ps_(num_ps), replicas_(KUBETRAIN_BIN, num_ps, /*num_workers=*/2) {
  WriteDataset(dir_, 400, 50);
  absl::StatusOr<std::vector<int>> ports =
      launcher::AllocateLoopbackPorts(static_cast<int>(All().size()));
  EXPECT_TRUE(ports.ok()) << ports.status();
  if (!ports.ok()) return;
  int i = 0;
  for (const auto& [type, index] : All()) metrics_ports_[Key(type, index)] = (*ports)[i++];
}

MetricsJob::~MetricsJob() {
  if (running_) Stop();
}

void MetricsJob::Start(const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {"--data", dir_.path(),   "--epochs", "100000",    "--batch-size",
                                   "10",     "--log-every", "200",      "--threads", "1"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  for (const auto& [type, index] : All()) {
    replicas_.Start(type, index, args,
                    {absl::StrCat("KUBETRAIN_METRICS_PORT=", MetricsPort(type, index)),
                     absl::StrCat("KUBETRAIN_JOB_NAME=", kJobName),
                     absl::StrCat("KUBETRAIN_NAMESPACE=", kNamespace),
                     absl::StrCat("KUBETRAIN_REPLICA_TYPE=", type),
                     absl::StrCat("KUBETRAIN_REPLICA_INDEX=", index)});
  }
  running_ = true;
}

void MetricsJob::Stop() {
  for (const auto& [type, index] : All()) replicas_.Kill(type, index, SIGTERM);
  EXPECT_TRUE(replicas_.WaitAll(std::chrono::seconds(20))) << "replicas did not stop";
  running_ = false;
}

int MetricsJob::MetricsPort(const std::string& type, int index) const {
  auto it = metrics_ports_.find(Key(type, index));
  return it == metrics_ports_.end() ? 0 : it->second;
}

absl::StatusOr<std::string> MetricsJob::Scrape(const std::string& type, int index) const {
  absl::StatusOr<metrics::testing_util::HttpResponse> r =
      metrics::testing_util::HttpGet(MetricsPort(type, index), "/metrics");
  if (!r.ok()) return r.status();
  if (r->status != 200) {
    return absl::UnavailableError(absl::StrCat("HTTP ", r->status, ": ", r->body));
  }
  return r->body;
}

bool MetricsJob::WaitForScrape(const std::string& type, int index,
                               const std::function<bool(const std::string&)>& pred,
                               std::chrono::seconds timeout, std::string* last) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    absl::StatusOr<std::string> body = Scrape(type, index);
    if (last != nullptr) *last = body.ok() ? *body : body.status().ToString();
    if (body.ok() && pred(*body)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Poll interval, not a wait for luck: the deadline bounds the loop.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace kubetrain::testing_util
