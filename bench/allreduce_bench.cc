// kubetrain_allreduce_bench: allreduce bus bandwidth on loopback.
//   busbw = algbw * 2(N-1)/N, algbw = bytes / time of one allreduce
// for kubetrain's TCP ring (N processes), OpenMPI's MPI_Allreduce with its
// TCP transport (what ranks on different hosts use) and with its default
// (shared memory) transport, all measured in the same run, plus one raw TCP
// stream as the link's ceiling. Prints one table and the ratios the
// allreduce issue's goal is stated in (>= 1.2x OpenMPI-TCP at >= 16 MB).
//
//   kubetrain_allreduce_bench [--ranks 2,4] [--sizes-mb 1,4,16,64,256]
//                             [--chunk-kb 1024] [--no-mpi]
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/exchange/allreduce/ring_allreduce.h"

namespace {

using kubetrain::allreduce::RingAllreduce;
using kubetrain::allreduce::RingOptions;
using kubetrain::exchange::TcpConnection;
using kubetrain::exchange::TcpListener;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int Iterations(double bytes) { return std::clamp(static_cast<int>(2e9 / bytes), 3, 50); }

// Seconds per allreduce of each size on an N-process ring (rank 0's view).
std::map<double, double> RunRing(int world, const std::vector<double>& sizes_mb,
                                 int64_t chunk_bytes) {
  std::vector<TcpListener> listeners;
  for (int r = 0; r < world; ++r) listeners.push_back(*TcpListener::Listen("127.0.0.1", 0));
  int pipefd[2];
  if (pipe(pipefd) != 0) std::abort();
  std::vector<pid_t> kids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(pipefd[0]);
      absl::StatusOr<TcpConnection> right = TcpConnection::Connect(
          absl::StrCat("127.0.0.1:", listeners[(r + 1) % world].port()), 30, nullptr);
      absl::StatusOr<TcpConnection> left = listeners[r].Accept(30, nullptr);
      if (!right.ok() || !left.ok()) _exit(2);
      RingAllreduce ring(r, world, *std::move(right), *std::move(left),
                         RingOptions{.chunk_bytes = chunk_bytes});
      std::string report;
      float token = 1;
      for (double mb : sizes_mb) {
        const int64_t n = static_cast<int64_t>(mb * 1048576) / 4;
        std::vector<float> buf(static_cast<size_t>(n), 1.0f);
        const int iters = Iterations(mb * 1048576);
        if (!ring.AllreduceSum(buf, nullptr).ok()) _exit(3);  // warm-up
        if (!ring.AllreduceSum(std::span<float>(&token, 1), nullptr).ok()) _exit(3);
        const double t0 = Now();
        for (int i = 0; i < iters; ++i) {
          if (!ring.AllreduceSum(buf, nullptr).ok()) _exit(3);
        }
        if (!ring.AllreduceSum(std::span<float>(&token, 1), nullptr).ok()) _exit(3);
        absl::StrAppend(&report, mb, " ", (Now() - t0) / iters, "\n");
      }
      if (r == 0 && write(pipefd[1], report.data(), report.size()) < 0) _exit(4);
      _exit(0);
    }
    kids.push_back(pid);
  }
  close(pipefd[1]);
  listeners.clear();
  std::string text;
  char buf[4096];
  for (ssize_t k; (k = read(pipefd[0], buf, sizeof(buf))) > 0;)
    text.append(buf, static_cast<size_t>(k));
  close(pipefd[0]);
  for (pid_t p : kids) waitpid(p, nullptr, 0);
  std::map<double, double> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    double mb = 0, s = 0;
    if (f.size() == 2 && absl::SimpleAtod(f[0], &mb) && absl::SimpleAtod(f[1], &s)) out[mb] = s;
  }
  return out;
}

// OpenMPI through mpirun; `btl` empty = OpenMPI's default transports.
std::map<double, double> RunMpi(int world, const std::vector<double>& sizes_mb,
                                const std::string& btl) {
  std::string cmd =
      absl::StrCat("mpirun --allow-run-as-root --oversubscribe -np ", world, " --mca pml ob1");
  if (!btl.empty()) {
    absl::StrAppend(&cmd, " --mca btl ", btl, " --mca btl_tcp_if_include lo");
  }
  absl::StrAppend(&cmd, " ", KUBETRAIN_MPI_PEER);
  for (double mb : sizes_mb) absl::StrAppend(&cmd, " ", mb);
  absl::StrAppend(&cmd, " 2>/dev/null");
  std::map<double, double> out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char line[256];
  while (fgets(line, sizeof(line), p) != nullptr) {
    double bytes = 0, s = 0;
    if (sscanf(line, "%lf %lf", &bytes, &s) == 2) out[bytes / 1048576] = s;
  }
  pclose(p);
  return out;
}

// One TCP stream over loopback: GB/s of payload.
double RawTcpGBps() {
  TcpListener l = *TcpListener::Listen("127.0.0.1", 0);
  const size_t chunk = 4 << 20;
  const int64_t total = int64_t{4} << 30;
  std::thread sender([&] {
    TcpConnection c = *TcpConnection::Connect(absl::StrCat("127.0.0.1:", l.port()), 10, nullptr);
    std::vector<char> buf(chunk, 1);
    for (int64_t sent = 0; sent < total; sent += chunk) {
      if (!c.SendAll(buf.data(), chunk, nullptr).ok()) return;
    }
  });
  TcpConnection in = *l.Accept(10, nullptr);
  std::vector<char> buf(chunk);
  const double t0 = Now();
  for (int64_t got = 0; got < total; got += chunk) {
    if (!in.RecvAll(buf.data(), chunk, nullptr).ok()) break;
  }
  const double t = Now() - t0;
  sender.join();
  return static_cast<double>(total) / t / 1e9;
}

std::vector<double> ParseList(const std::string& s) {
  std::vector<double> v;
  for (absl::string_view x : absl::StrSplit(s, ',', absl::SkipEmpty())) {
    double d = 0;
    if (absl::SimpleAtod(x, &d)) v.push_back(d);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<double> ranks = {2, 4}, sizes = {1, 4, 16, 64, 256};
  int64_t chunk_kb = 1024;
  bool mpi = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc)
      ranks = ParseList(argv[++i]);
    else if (a == "--sizes-mb" && i + 1 < argc)
      sizes = ParseList(argv[++i]);
    else if (a == "--chunk-kb" && i + 1 < argc)
      chunk_kb = std::atoll(argv[++i]);
    else if (a == "--no-mpi")
      mpi = false;
    else {
      std::fprintf(stderr,
                   "usage: %s [--ranks 2,4] [--sizes-mb 1,4,16,64,256] [--chunk-kb N] [--no-mpi]\n",
                   argv[0]);
      return 2;
    }
  }
  const double raw = RawTcpGBps();
  std::printf("raw TCP stream on loopback: %.2f GB/s (the link ceiling)\n\n", raw);
  std::printf("%5s %8s %14s %14s %14s %10s %10s\n", "ranks", "MB", "kubetrain", "ompi-tcp",
              "ompi-default", "vs tcp", "of raw");
  std::printf("%5s %8s %14s %14s %14s %10s %10s\n", "", "", "busbw GB/s", "busbw GB/s",
              "busbw GB/s", "", "TCP");
  for (double nr : ranks) {
    const int world = static_cast<int>(nr);
    const double factor = 2.0 * (world - 1) / world;
    std::map<double, double> ours = RunRing(world, sizes, chunk_kb * 1024);
    std::map<double, double> tcp, shm;
    if (mpi) {
      tcp = RunMpi(world, sizes, "tcp,self");
      shm = RunMpi(world, sizes, "");
    }
    auto busbw = [&](const std::map<double, double>& m, double mb) {
      auto it = m.find(mb);
      return it == m.end() || it->second <= 0 ? 0.0 : mb * 1048576 / it->second * factor / 1e9;
    };
    for (double mb : sizes) {
      const double k = busbw(ours, mb), t = busbw(tcp, mb), s = busbw(shm, mb);
      std::printf("%5d %8g %14.2f %14.2f %14.2f %9.2fx %9.2f\n", world, mb, k, t, s,
                  t > 0 ? k / t : 0.0, k / raw);
    }
  }
  return 0;
}
