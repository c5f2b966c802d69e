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
//
// On shaped test hosts (scripts/test-hosts.sh up --hosts N --rate R), as
// root: --hosts PREFIX puts rank r in network namespace PREFIX-r, listening
// on its own address, and compares the ring's bus bandwidth with the link's
// rate (--link-mbit, tc's figure) and with one TCP stream from host 0 to
// host 1 (the payload ceiling); no MPI. --iterations fixes the allreduces
// per size (slow links).
//   kubetrain_allreduce_bench --hosts kth --link-mbit 100 --ranks 2,4,8
//                             --sizes-mb 4,16,64 --iterations 5
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
// Test hosts: rank r runs in network namespace `prefix`-r at addresses[r].
struct Hosts {
  std::string prefix;  // empty: every rank on loopback
  std::vector<std::string> addresses;
  int iterations = 0;  // 0: by size
};
constexpr int kHostPort = 5411;

// Moves this process into network namespace `name` (ip netns's).
bool EnterNetns(const std::string& name) {
  const int fd = open(absl::StrCat("/run/netns/", name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = setns(fd, CLONE_NEWNET) == 0;
  close(fd);
  return ok;
}

std::map<double, double> RunRing(int world, const std::vector<double>& sizes_mb,
                                 int64_t chunk_bytes, const Hosts& hosts = {}) {
  const bool on_hosts = !hosts.prefix.empty();
  std::vector<TcpListener> listeners;
  for (int r = 0; r < world && !on_hosts; ++r) {
    listeners.push_back(*TcpListener::Listen("127.0.0.1", 0));
  }
  int pipefd[2];
  if (pipe(pipefd) != 0) std::abort();
  std::vector<pid_t> kids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(pipefd[0]);
      std::string right_address;
      if (on_hosts) {
        if (!EnterNetns(absl::StrCat(hosts.prefix, "-", r))) _exit(5);
        absl::StatusOr<TcpListener> l = TcpListener::Listen("0.0.0.0", kHostPort);
        if (!l.ok()) _exit(5);
        listeners.clear();
        listeners.push_back(*std::move(l));
        right_address = absl::StrCat(hosts.addresses[(r + 1) % world], ":", kHostPort);
      } else {
        right_address = absl::StrCat("127.0.0.1:", listeners[(r + 1) % world].port());
      }
      absl::StatusOr<TcpConnection> right = TcpConnection::Connect(right_address, 30, nullptr);
      absl::StatusOr<TcpConnection> left = listeners[on_hosts ? 0 : r].Accept(30, nullptr);
      if (!right.ok() || !left.ok()) _exit(2);
      RingAllreduce ring(r, world, *std::move(right), *std::move(left),
                         RingOptions{.chunk_bytes = chunk_bytes});
      std::string report;
      float token = 1;
      for (double mb : sizes_mb) {
        const int64_t n = static_cast<int64_t>(mb * 1048576) / 4;
        std::vector<float> buf(static_cast<size_t>(n), 1.0f);
        const int iters = hosts.iterations > 0 ? hosts.iterations : Iterations(mb * 1048576);
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

// Host r's address: the IPv4 address of eth0 in namespace `prefix`-r.
std::string HostAddress(const std::string& prefix, int r) {
  const std::string cmd = absl::StrCat("ip -n ", prefix, "-", r, " -4 -o addr show dev eth0");
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char line[512];
    while (fgets(line, sizeof(line), p) != nullptr) out += line;
    pclose(p);
  }
  const size_t at = out.find("inet ");
  if (at == std::string::npos) return "";
  const size_t end = out.find('/', at);
  return out.substr(at + 5, end - at - 5);
}

// One TCP stream from host 0 to host 1 of the test hosts: MB/s of payload.
double HostTcpMBps(const Hosts& hosts, double link_mbit) {
  // About 2 s of the link, at least 8 MB.
  const int64_t chunk = 1 << 20;
  const int64_t total = std::max<int64_t>(8, static_cast<int64_t>(link_mbit / 8 * 2)) * chunk;
  int pipefd[2];
  if (pipe(pipefd) != 0) std::abort();
  const pid_t receiver = fork();
  if (receiver == 0) {
    close(pipefd[0]);
    if (!EnterNetns(absl::StrCat(hosts.prefix, "-1"))) _exit(5);
    absl::StatusOr<TcpListener> l = TcpListener::Listen("0.0.0.0", kHostPort + 1);
    if (!l.ok()) _exit(5);
    absl::StatusOr<TcpConnection> in = l->Accept(30, nullptr);
    if (!in.ok()) _exit(5);
    std::vector<char> buf(chunk);
    double t0 = 0;
    for (int64_t got = 0; got < total; got += chunk) {
      if (!in->RecvAll(buf.data(), chunk, nullptr).ok()) _exit(6);
      if (got == 0) t0 = Now();  // from the first chunk: no connection set-up
    }
    const std::string r = absl::StrCat((total - chunk) / (Now() - t0) / 1e6);
    if (write(pipefd[1], r.data(), r.size()) < 0) _exit(4);
    _exit(0);
  }
  const pid_t sender = fork();
  if (sender == 0) {
    if (!EnterNetns(absl::StrCat(hosts.prefix, "-0"))) _exit(5);
    absl::StatusOr<TcpConnection> c =
        TcpConnection::Connect(absl::StrCat(hosts.addresses[1], ":", kHostPort + 1), 30, nullptr);
    if (!c.ok()) _exit(5);
    std::vector<char> buf(chunk, 1);
    for (int64_t sent = 0; sent < total; sent += chunk) {
      if (!c->SendAll(buf.data(), chunk, nullptr).ok()) _exit(6);
    }
    _exit(0);
  }
  close(pipefd[1]);
  char buf[64] = {};
  const ssize_t n = read(pipefd[0], buf, sizeof(buf) - 1);
  close(pipefd[0]);
  waitpid(receiver, nullptr, 0);
  waitpid(sender, nullptr, 0);
  double mbps = 0;
  if (n > 0) absl::SimpleAtod(absl::string_view(buf, static_cast<size_t>(n)), &mbps);
  return mbps;
}

// The hosts' table: bus bandwidth against tc's rate and one TCP stream.
int RunOnHosts(Hosts hosts, const std::vector<double>& ranks, const std::vector<double>& sizes,
               int64_t chunk_bytes, double link_mbit) {
  int most = 2;
  for (double r : ranks) most = std::max(most, static_cast<int>(r));
  for (int r = 0; r < most; ++r) {
    hosts.addresses.push_back(HostAddress(hosts.prefix, r));
    if (hosts.addresses.back().empty()) {
      std::fprintf(stderr, "no test host %s-%d (scripts/test-hosts.sh up --hosts %d)\n",
                   hosts.prefix.c_str(), r, most);
      return 2;
    }
  }
  const double link = link_mbit / 8;  // MB/s
  const double stream = HostTcpMBps(hosts, link_mbit);
  std::printf(
      "test hosts %s-*: link %.0f Mbit/s (%.2f MB/s) each way; one TCP stream host 0 -> 1: "
      "%.2f MB/s of payload (%.3f of the link)\n\n",
      hosts.prefix.c_str(), link_mbit, link, stream, stream / link);
  std::printf("%5s %8s %12s %10s %12s\n", "ranks", "MB", "busbw MB/s", "of link", "of stream");
  for (double nr : ranks) {
    const int world = static_cast<int>(nr);
    const double factor = 2.0 * (world - 1) / world;
    std::map<double, double> ours = RunRing(world, sizes, chunk_bytes, hosts);
    for (double mb : sizes) {
      auto it = ours.find(mb);
      const double bw =
          it == ours.end() || it->second <= 0 ? 0 : mb * 1048576 / it->second * factor / 1e6;
      std::printf("%5d %8g %12.2f %10.3f %12.3f\n", world, mb, bw, bw / link,
                  stream > 0 ? bw / stream : 0.0);
    }
  }
  return 0;
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
  Hosts hosts;
  double link_mbit = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--hosts" && i + 1 < argc) {
      hosts.prefix = argv[++i];
      continue;
    }
    if (a == "--link-mbit" && i + 1 < argc) {
      link_mbit = std::atof(argv[++i]);
      continue;
    }
    if (a == "--iterations" && i + 1 < argc) {
      hosts.iterations = std::atoi(argv[++i]);
      continue;
    }
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
                   "usage: %s [--ranks 2,4] [--sizes-mb 1,4,16,64,256] [--chunk-kb N] [--no-mpi]\n"
                   "          [--hosts PREFIX --link-mbit R [--iterations N]]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!hosts.prefix.empty()) {
    if (!(link_mbit > 0)) {
      std::fprintf(stderr, "--hosts needs --link-mbit (the rate test-hosts.sh shaped)\n");
      return 2;
    }
    return RunOnHosts(hosts, ranks, sizes, chunk_kb * 1024, link_mbit);
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
