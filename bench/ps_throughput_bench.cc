// Parameter-server push+pull throughput next to a plain TCP transfer of the
// same bytes, measured in the same process over loopback. Run with:
//   build/bench/kubetrain_ps_bench            (full table, ~1.5 min)
//   build/bench/kubetrain_ps_bench --quick    (64 MB only)
//
// Each cell starts 1 or 2 in-process parameter-server shards (PsShard +
// ShardSession + GrpcShardServer on 127.0.0.1:0, sgd with momentum 0) and W worker threads, each
// with its own PsExchange (its own channels, so its own TCP connections).
// A worker step pushes the gradient and pulls the parameters: 2 * 4 bytes
// per parameter (2 * 2 with --wire-dtype=fp16). The TCP peer runs W client threads, each with its
// own connection (TCP_NODELAY) to a server thread that reads N bytes and writes N bytes back, for
// the same number of steps; each transfer is one send/recv loop over the whole N-byte buffer.
// Socket buffers are left to the kernel's autotuning, as gRPC leaves them (on Linux it grows them
// to tcp_rmem/tcp_wmem max, beyond what SO_RCVBUF may ask for);
// --tcp-buffer=BYTES sets SO_SNDBUF/SO_RCVBUF instead. Throughput is total
// bytes / wall time; GB/s is 1e9 bytes/s. Each phase also records the CPU
// time (user + system, every thread of the process) per GB moved:
// cpu_ratio = TCP's CPU per GB / the PS's, which other processes on a
// shared machine disturb far less than the wall-time ratio.
//
// A third peer, the floor: the same TCP ping-pong doing the per-byte work
// that any parameter server has to do, with no user-space copy at all. The
// worker checksums (CRC-32C) each 256 KiB piece of its gradient just before
// sending it and sends the checksum after the last piece. The server
// receives the pieces straight into the gradient slot, checksumming and
// counting NaN/Inf in each while it is in cache, checks the checksum,
// applies SGD and checksums the parameters piece by piece, then sends them
// straight from the parameter buffer. The worker receives them straight into
// its parameters, checksumming each piece. A real PS needs a snapshot copy
// for concurrent readers on top of this, so floor_GBps bounds what any PS
// implementation reaches on this machine; `vs_floor` = ps_GBps / floor_GBps.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "base/clock.h"
#include "base/crc32c.h"
#include "runtime/exchange/grpc_util.h"
#include "runtime/exchange/ps/grpc_shard_server.h"
#include "runtime/exchange/ps/ps_exchange.h"
#include "runtime/exchange/ps/ps_shard.h"
#include "runtime/exchange/ps/shard_session.h"
#include "runtime/exchange/ps/tcp_shard_server.h"
#include "runtime/exchange/ps/wire_values.h"
#include "runtime/tensor/kernels/optimizer_update.h"

namespace kubetrain::ps {
namespace {

using WallClock = std::chrono::steady_clock;

constexpr int64_t kParamsPerMb = 262144;  // 1 MiB of float32

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "kubetrain_ps_bench: %s\n", what.c_str());
  std::exit(1);
}

double Seconds(WallClock::time_point a, WallClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU seconds (user + system) this process has used, all threads: the
// servers, workers and TCP peers all run in it.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// One shard served on an ephemeral loopback port (as in grpc_shard_server_test).
class LoopbackShard {
 public:
  // `tcp`: the direct TCP data plane beside gRPC, as RunParameterServer
  // serves with --ps-data-plane tcp; else gRPC only (its default).
  // `pipeline`: sync steps pipelined chunk by chunk (--ps-pipeline).
  LoopbackShard(int index, int num_shards, int num_workers, const std::string& mode, bool tcp,
                bool pipeline) {
    PsShardOptions o;
    o.shard_index = index;
    o.num_shards = num_shards;
    o.num_workers = num_workers;
    absl::StatusOr<ExchangeMode> m = ExchangeMode::Parse(mode);
    if (!m.ok()) Die(std::string(m.status().message()));
    o.mode = *m;
    o.optimizer.kind = "sgd";
    o.optimizer.momentum = 0;
    o.lr.base_lr = 0.01f;
    o.incarnation = 1000 + index;
    o.pipeline = pipeline;
    shard_ = std::make_unique<PsShard>(o, clock_, [](const std::string&) {});
    session_ = std::make_unique<ShardSession>(*shard_, "");
    service_ = std::make_unique<GrpcShardServer>(*session_);
    if (tcp) {
      absl::StatusOr<std::unique_ptr<TcpShardServer>> d =
          TcpShardServer::Start(*session_, "127.0.0.1");
      if (!d.ok()) Die(std::string(d.status().message()));
      data_ = std::move(*d);
      service_->set_data_port(data_->port());
    }
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    // The same server settings as RunParameterServer (ps_server.cc).
    b.SetMaxReceiveMessageSize(-1);
    b.SetMaxSendMessageSize(-1);
    b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
    exchange::SetBulkTransferArgs(b);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    if (!server_ || port_ == 0) Die("could not start a parameter server on 127.0.0.1");
  }
  ~LoopbackShard() {
    shard_->Abort(absl::UnavailableError("benchmark over"));
    if (data_ != nullptr) data_->Stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  RealClock clock_;
  std::unique_ptr<PsShard> shard_;
  std::unique_ptr<ShardSession> session_;
  std::unique_ptr<GrpcShardServer> service_;
  std::unique_ptr<TcpShardServer> data_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// Runs `steps` on every one of `workers` threads in lock-step phases:
// Run(n) releases the threads, waits until each did n steps and returns the
// wall time. The threads are created once, so setup stays outside timing.
class PhaseRunner {
 public:
  using StepFn = std::function<void(int worker)>;
  PhaseRunner(int workers, std::function<void(int)> setup, StepFn step)
      : step_(std::move(step)), sync_(workers + 1) {
    for (int w = 0; w < workers; ++w) {
      threads_.emplace_back([this, w, setup] {
        setup(w);
        sync_.arrive_and_wait();  // set up
        while (true) {
          sync_.arrive_and_wait();  // released
          const int n = steps_.load();
          if (n < 0) return;
          for (int i = 0; i < n; ++i) step_(w);
          sync_.arrive_and_wait();  // done
        }
      });
    }
    sync_.arrive_and_wait();
  }
  ~PhaseRunner() {
    steps_.store(-1);
    sync_.arrive_and_wait();
    for (std::thread& t : threads_) t.join();
  }
  double Run(int steps) {
    steps_.store(steps);
    const WallClock::time_point t0 = WallClock::now();
    sync_.arrive_and_wait();
    sync_.arrive_and_wait();
    return Seconds(t0, WallClock::now());
  }

 private:
  StepFn step_;
  std::barrier<> sync_;
  std::atomic<int> steps_{0};
  std::vector<std::thread> threads_;
};

// Steps that make a timed phase last about `target` seconds, from a timed
// calibration phase of `calib_steps` that took `calib_seconds`.
int StepsFor(double target, double calib_seconds, int calib_steps) {
  const double per_step = std::max(calib_seconds / calib_steps, 1e-6);
  return static_cast<int>(std::clamp(std::ceil(target / per_step), 3.0, 5000.0));
}

struct PsResult {
  double seconds = 0;
  double cpu_seconds = 0;
  int steps = 0;
};

// Parameter servers: `shards` loopback shards in `mode`, `workers` worker
// threads each driving its own PsExchange; as many steps as make the timed
// phase take about `target` seconds.
PsResult RunPs(int64_t num_params, int shards, int workers, const std::string& mode, bool tcp,
               bool pipeline, v1::WireDType dtype, double target) {
  std::vector<std::unique_ptr<LoopbackShard>> servers;
  std::vector<std::string> addresses;
  for (int i = 0; i < shards; ++i) {
    servers.push_back(std::make_unique<LoopbackShard>(i, shards, workers, mode, tcp, pipeline));
    addresses.push_back(servers.back()->address());
  }
  absl::StatusOr<ExchangeMode> m = ExchangeMode::Parse(mode);
  if (!m.ok()) Die(std::string(m.status().message()));
  RealClock clock;
  struct Worker {
    std::unique_ptr<PsExchange> exchange;
    std::vector<float> params, grads;
    int64_t clock = 0;
  };
  std::vector<Worker> ws(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) {
    PsExchangeOptions o;
    o.ps_addresses = addresses;
    o.worker = w;
    o.worker_name = "worker-" + std::to_string(w);
    o.initializer = w == 0;
    o.mode = *m;
    o.wire_dtype = dtype;
    o.peer_timeout_seconds = 30;
    ws[w].exchange = std::make_unique<PsExchange>(o, clock, [](const std::string&) {});
    ws[w].params.assign(static_cast<size_t>(num_params), 0.5f);
    ws[w].grads.assign(static_cast<size_t>(num_params), 1e-4f);
  }
  auto setup = [&](int w) {
    absl::StatusOr<int64_t> c = ws[w].exchange->Start(ws[w].params);
    if (!c.ok()) Die("Start: " + std::string(c.status().message()));
    ws[w].clock = *c;
  };
  auto step = [&](int w) {
    absl::StatusOr<int64_t> c = ws[w].exchange->Step(ws[w].clock, ws[w].grads, ws[w].params);
    if (!c.ok()) Die("Step: " + std::string(c.status().message()));
    ws[w].clock = *c;
  };
  PsResult r;
  {
    PhaseRunner runner(workers, setup, step);
    runner.Run(1);  // warm-up: connections, buffers, first-touch pages
    r.steps = StepsFor(target, runner.Run(2), 2);
    const double cpu0 = ProcessCpuSeconds();
    r.seconds = runner.Run(r.steps);
    r.cpu_seconds = ProcessCpuSeconds() - cpu0;
  }
  if (!std::isfinite(ws[0].params[0])) Die("parameters went non-finite");
  return r;
}

// TCP_NODELAY; SO_SNDBUF and SO_RCVBUF only when `buffer` > 0 (setting
// them turns the kernel's autotuning off).
void SetSocketOptions(int fd, int buffer) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (buffer > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  }
}

void SendAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) Die(std::string("send: ") + std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// False when the peer closed the connection before the first byte and
// `eof_ok`.
bool RecvAll(int fd, char* p, size_t n, bool eof_ok) {
  const size_t want = n;
  while (n > 0) {
    const ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0 && eof_ok && n == want) return false;
    if (k <= 0) Die(std::string("recv: ") + (k == 0 ? "peer closed" : std::strerror(errno)));
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Raw TCP: `workers` connections to an echo server (one thread per
// connection) on 127.0.0.1; a step sends `bytes` and receives `bytes` back.
// The phase of `steps` steps runs at least once and is repeated until it
// has run `min_seconds` in all (it is faster than the PS phase of the same
// steps, and one short phase is noisy); returns bytes/s over every
// repetition, and the CPU seconds per byte moved.
struct TcpResult {
  double bytes_per_second = 0;
  double cpu_seconds_per_byte = 0;
};
constexpr size_t kPieceBytes = 256 * 1024;

// The floor's server step on one connection: receive a gradient and its
// checksum, apply it, send the parameters and their checksum. False when the
// worker closed its end before the step's first byte.
bool FloorServerStep(int fd, std::vector<char>& grad, std::vector<float>& params) {
  const size_t n = grad.size();
  uint32_t crc = 0;
  int64_t nonfinite = 0;
  for (size_t off = 0; off < n; off += kPieceBytes) {
    const size_t k = std::min(kPieceBytes, n - off);
    if (!RecvAll(fd, grad.data() + off, k, /*eof_ok=*/off == 0)) return false;
    crc = base::Crc32cExtend(crc, grad.data() + off, k);
    nonfinite += CountNonFinite(reinterpret_cast<const float*>(grad.data() + off), k / 4);
  }
  uint32_t want = 0;
  RecvAll(fd, reinterpret_cast<char*>(&want), sizeof(want), /*eof_ok=*/false);
  if (want != crc || nonfinite != 0) Die("floor peer: corrupt gradient");
  kernels::SgdParams sgd;
  sgd.lr = 0.01f;
  const float* g = reinterpret_cast<const float*>(grad.data());
  const int64_t count = static_cast<int64_t>(params.size());
  const int64_t piece = static_cast<int64_t>(kPieceBytes / 4);
  uint32_t out_crc = 0;
  for (int64_t off = 0; off < count; off += piece) {
    const int64_t end = std::min(count, off + piece);
    kernels::SgdUpdate(sgd, off, end, params.data(), g, nullptr);
    out_crc = base::Crc32cExtend(out_crc, params.data() + off, static_cast<size_t>(end - off) * 4);
  }
  SendAll(fd, reinterpret_cast<const char*>(params.data()), n);
  SendAll(fd, reinterpret_cast<const char*>(&out_crc), sizeof(out_crc));
  return true;
}

// The floor's worker step: send the gradient with its checksum, receive the
// parameters and check theirs.
void FloorWorkerStep(int fd, const std::vector<char>& grad, std::vector<char>& params) {
  const size_t n = grad.size();
  uint32_t crc = 0;
  for (size_t off = 0; off < n; off += kPieceBytes) {
    const size_t k = std::min(kPieceBytes, n - off);
    crc = base::Crc32cExtend(crc, grad.data() + off, k);
    SendAll(fd, grad.data() + off, k);
  }
  SendAll(fd, reinterpret_cast<const char*>(&crc), sizeof(crc));
  uint32_t got = 0;
  for (size_t off = 0; off < n; off += kPieceBytes) {
    const size_t k = std::min(kPieceBytes, n - off);
    RecvAll(fd, params.data() + off, k, /*eof_ok=*/false);
    got = base::Crc32cExtend(got, params.data() + off, k);
  }
  uint32_t want = 0;
  RecvAll(fd, reinterpret_cast<char*>(&want), sizeof(want), /*eof_ok=*/false);
  if (want != got) Die("floor peer: corrupt parameters");
}

// `floor`: each step does the PS's per-byte work (FloorServerStep and
// FloorWorkerStep) instead of a bare echo.
TcpResult RunTcp(int64_t bytes, int workers, int steps, double min_seconds, int buffer,
                 bool floor) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) Die(std::string("socket: ") + std::strerror(errno));
  SetSocketOptions(listener, buffer);  // accepted sockets inherit the buffer sizes
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, workers) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Die(std::string("bind/listen: ") + std::strerror(errno));
  }
  const size_t n = static_cast<size_t>(bytes);
  constexpr int kMaxReps = 64;
  const int total = steps * kMaxReps + 1;  // upper bound; one warm-up step
  std::vector<std::thread> servers;
  // Accept in a thread so the clients below can connect.
  std::thread acceptor([&] {
    for (int w = 0; w < workers; ++w) {
      const int fd = accept(listener, nullptr, nullptr);
      if (fd < 0) Die(std::string("accept: ") + std::strerror(errno));
      SetSocketOptions(fd, buffer);
      servers.emplace_back([fd, n, total, floor] {
        std::vector<char> buf(n);
        std::vector<float> params(floor ? n / 4 : 0, 0.5f);
        for (int s = 0; s < total; ++s) {
          // The client closing its end before `total` steps ends the loop.
          if (floor) {
            if (!FloorServerStep(fd, buf, params)) break;
            continue;
          }
          if (!RecvAll(fd, buf.data(), n, /*eof_ok=*/true)) break;
          SendAll(fd, buf.data(), n);
        }
        close(fd);
      });
    }
  });
  std::vector<int> fds(static_cast<size_t>(workers));
  std::vector<std::vector<char>> out(static_cast<size_t>(workers)),
      in(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) {
    fds[w] = socket(AF_INET, SOCK_STREAM, 0);
    SetSocketOptions(fds[w], buffer);
    if (connect(fds[w], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      Die(std::string("connect: ") + std::strerror(errno));
    }
    out[w].assign(n, 0);
    for (size_t i = 0; i + 4 <= n; i += 4) {  // 1e-4f: a finite gradient for the floor
      const float g = 1e-4f;
      std::memcpy(out[w].data() + i, &g, sizeof(g));
    }
    in[w].assign(n, 0);
  }
  acceptor.join();
  close(listener);
  double seconds = 0, cpu = 0;
  int reps = 0;
  {
    auto step = [&](int w) {
      if (floor) {
        FloorWorkerStep(fds[w], out[w], in[w]);
        return;
      }
      SendAll(fds[w], out[w].data(), n);
      RecvAll(fds[w], in[w].data(), n, /*eof_ok=*/false);
    };
    PhaseRunner runner(
        workers, [](int) {}, step);
    runner.Run(1);
    while (reps < kMaxReps && (reps == 0 || seconds < min_seconds)) {
      const double cpu0 = ProcessCpuSeconds();
      seconds += runner.Run(steps);
      cpu += ProcessCpuSeconds() - cpu0;
      ++reps;
    }
  }
  for (int fd : fds) close(fd);
  for (std::thread& t : servers) t.join();
  const double moved = 2.0 * static_cast<double>(bytes) * workers * steps * reps;
  return TcpResult{moved / seconds, cpu / moved};
}

struct Row {
  int mb, shards, workers;
  std::string mode, plane;
  int steps;
  double ps_gbps, tcp_gbps;
  double ps_cpu_per_gb, tcp_cpu_per_gb;  // CPU seconds per GB moved
  double floor_gbps;                     // the floor peer (RunTcp with `floor`)
};

struct Settings {
  double target = 0.8;  // seconds per timed PS phase
  int tcp_buffer = 0;   // SO_SNDBUF/SO_RCVBUF; 0: autotuned
  // The PS's values on the wire; the TCP peer and the floor move the same
  // bytes (2 per value in fp16).
  v1::WireDType dtype = v1::WIRE_DTYPE_F32;
};

Row Measure(int mb, int shards, int workers, const std::string& mode, const std::string& plane,
            const Settings& set) {
  const int64_t num_params = mb * kParamsPerMb;
  const PsResult ps = RunPs(num_params, shards, workers, mode, plane != "grpc", plane == "pipe",
                            set.dtype, set.target);
  const int64_t per_value = set.dtype == v1::WIRE_DTYPE_F16 ? 2 : 4;
  const TcpResult tcp = RunTcp(num_params * per_value, workers, ps.steps, set.target,
                               set.tcp_buffer, /*floor=*/false);
  const TcpResult floor_peer =
      RunTcp(num_params * per_value, workers, ps.steps, set.target, set.tcp_buffer, /*floor=*/true);
  const double bytes = 2.0 * static_cast<double>(per_value * num_params) * workers * ps.steps;
  return Row{mb,
             shards,
             workers,
             mode,
             plane,
             ps.steps,
             bytes / ps.seconds * 1e-9,
             tcp.bytes_per_second * 1e-9,
             ps.cpu_seconds / bytes * 1e9,
             tcp.cpu_seconds_per_byte * 1e9,
             floor_peer.bytes_per_second * 1e-9};
}

void PrintRow(const Row& r) {
  std::printf(
      "%7d  %6d  %7d  %-5s  %-5s  %5d  %8.2f  %8.2f  %5.2f  %9.3f  %9.3f  %9.2f  %10.2f  %8.2f  "
      "%8.2f\n",
      r.mb, r.shards, r.workers, r.mode.c_str(), r.plane.c_str(), r.steps, r.ps_gbps, r.tcp_gbps,
      r.ps_gbps / r.tcp_gbps, r.ps_cpu_per_gb, r.tcp_cpu_per_gb, r.tcp_cpu_per_gb / r.ps_cpu_per_gb,
      r.floor_gbps, r.floor_gbps / r.tcp_gbps, r.ps_gbps / r.floor_gbps);
  std::fflush(stdout);
}

// "1,4,16" -> {1, 4, 16}; empty on a malformed list.
std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const int v = std::atoi(text.substr(pos, end - pos).c_str());
    if (v <= 0) return {};
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

int Main(int argc, char** argv) {
  std::vector<int> sizes = {1, 4, 16, 64}, shards = {1, 2}, workers = {1, 2, 3, 4};
  std::vector<std::string> modes = {"async"};
  std::vector<std::string> planes = {"tcp", "grpc"};
  bool sync_rows = true;
  Settings set;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq),
                      value = eq == std::string::npos ? "" : a.substr(eq + 1);
    bool ok = true;
    if (a == "--quick") {
      sizes = {64};
      workers = {1, 2};
    } else if (a == "--no-sync") {
      sync_rows = false;
    } else if (key == "--modes") {
      // Every size/shard/worker cell in each mode, instead of async plus the
      // two sync rows.
      modes.clear();
      for (const std::string& m : std::vector<std::string>(absl::StrSplit(value, ','))) {
        ok = ok && ExchangeMode::Parse(m).ok();
        modes.push_back(m);
      }
      ok = ok && !modes.empty();
      sync_rows = false;
    } else if (key == "--planes") {
      // The PS data planes to measure: the direct TCP one (the default of a
      // PS replica), gRPC alone (--ps-data-plane grpc), and the direct one
      // with pipelined sync steps (pipe: --ps-pipeline; async as tcp).
      planes.clear();
      for (const std::string& p : std::vector<std::string>(absl::StrSplit(value, ','))) {
        ok = ok && (p == "tcp" || p == "grpc" || p == "pipe");
        planes.push_back(p);
      }
      ok = ok && !planes.empty();
    } else if (key == "--wire-dtype") {
      ok = value == "fp32" || value == "fp16";
      set.dtype = value == "fp16" ? v1::WIRE_DTYPE_F16 : v1::WIRE_DTYPE_F32;
    } else if (key == "--seconds") {
      set.target = std::atof(value.c_str());
      ok = set.target > 0;
    } else if (key == "--tcp-buffer") {
      set.tcp_buffer = std::atoi(value.c_str());
      ok = set.tcp_buffer >= 0;
    } else if (key == "--sizes") {
      ok = !(sizes = ParseList(value)).empty();
    } else if (key == "--shards") {
      ok = !(shards = ParseList(value)).empty();
    } else if (key == "--workers") {
      ok = !(workers = ParseList(value)).empty();
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--sizes=1,4,16,64] [--shards=1,2] [--workers=1,2,3,4]\n"
                   "          [--modes=async,sync] [--planes=tcp,grpc] [--no-sync] [--seconds=S]\n"
                   "          [--tcp-buffer=BYTES] [--wire-dtype=fp32|fp16]\n"
                   "  --quick      64 MB only, 1 and 2 shards, 1 and 2 workers\n"
                   "  --no-sync    leave out the sync rows (64 MB, 2 workers)\n"
                   "  --modes=M,.. every cell in each of these modes (async, sync, ssp:N);\n"
                   "               replaces the two sync rows\n"
                   "  --planes=P,.. the PS data planes: tcp (direct, the default), grpc, and\n"
                   "               pipe (direct, sync steps pipelined: --ps-pipeline)\n"
                   "  --seconds=S  target wall time of each timed PS and TCP phase (default 0.8)\n"
                   "  --tcp-buffer=BYTES  SO_SNDBUF/SO_RCVBUF of the TCP peer (default 0:\n"
                   "               the kernel's autotuning)\n"
                   "  --wire-dtype=fp16  the PS's values in fp16 (converted on both sides);\n"
                   "               the TCP peer and the floor move the same bytes\n",
                   argv[0]);
      return a == "--help" ? 0 : 2;
    }
  }
  std::printf("push+pull over loopback, GB/s = 1e9 bytes/s on the wire; values in %s; %u CPUs\n",
              set.dtype == v1::WIRE_DTYPE_F16 ? "fp16 (2 bytes)" : "fp32 (4 bytes)",
              std::thread::hardware_concurrency());
  std::printf(
      "size_MB  shards  workers  mode   plane  steps   ps_GBps  tcp_GBps  ratio  ps_cpu_GB  "
      "tcp_cpu_GB  cpu_ratio  floor_GBps  floor/tcp  vs_floor\n");
  double headline = -1;
  for (const std::string& mode : modes) {
    for (int mb : sizes) {
      for (int s : shards) {
        for (int w : workers) {
          for (const std::string& plane : planes) {
            const Row r = Measure(mb, s, w, mode, plane, set);
            PrintRow(r);
            if (mb == 64 && s == 1 && w == 1 && mode == "async" && plane == planes.front()) {
              headline = r.ps_gbps / r.tcp_gbps;
            }
          }
        }
      }
    }
  }
  if (sync_rows) {
    for (int s : shards) {
      for (const std::string& plane : planes) PrintRow(Measure(64, s, 2, "sync", plane, set));
    }
  }
  if (headline >= 0) {
    std::printf("64MB ratio (1 shard, 1 worker, %s): %.2f (goal >= 0.8)\n", planes.front().c_str(),
                headline);
  }
  return 0;
}

}  // namespace
}  // namespace kubetrain::ps

int main(int argc, char** argv) {
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // as runtime/main.cc does
  mallopt(M_ARENA_MAX, 1);
  return kubetrain::ps::Main(argc, argv);
}
