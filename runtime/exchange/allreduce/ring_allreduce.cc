#include "runtime/exchange/allreduce/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/half_float.h"
#include "runtime/tensor/denormals.h"

namespace kubetrain::allreduce {
namespace {

// What the two halves of one collective share (Run's locals).
struct RunSync {
  absl::Mutex mu;
  absl::CondVar cv;                           // with mu: processed moved, or failed
  int64_t processed ABSL_GUARDED_BY(mu) = 0;  // receive items done
  bool failed ABSL_GUARDED_BY(mu) = false;
  absl::Status send_status ABSL_GUARDED_BY(mu), recv_status ABSL_GUARDED_BY(mu);
};

constexpr uint32_t kChunkMagic = 0x4b544152;  // "KTAR"

struct ChunkHeader {
  uint32_t magic;
  uint32_t seq;   // collective number on this ring
  uint32_t item;  // position in the collective's schedule
  uint32_t bytes;
};
static_assert(sizeof(ChunkHeader) == 16);

int Mod(int a, int n) { return ((a % n) + n) % n; }

size_t BytesPerElement(v1::WireDType d) { return d == v1::WIRE_DTYPE_F16 ? 2 : 4; }

}  // namespace

RingAllreduce::RingAllreduce(int rank, int world, exchange::TcpConnection right,
                             exchange::TcpConnection left, RingOptions options)
    : rank_(rank),
      world_(world),
      right_(std::move(right)),
      left_(std::move(left)),
      options_(options) {}

RingAllreduce::~RingAllreduce() {
  {
    absl::MutexLock l(&job_mu_);
    quit_ = true;
    job_cv_.SignalAll();
  }
  if (sender_.joinable()) sender_.join();
}

void RingAllreduce::SenderLoop() {
  FlushDenormalsInThisThread();
  job_mu_.Lock();
  while (true) {
    while (!quit_ && job_ == nullptr) job_cv_.Wait(&job_mu_);
    if (job_ == nullptr) break;  // quit with nothing to send
    const std::function<void()>* job = job_;
    job_mu_.Unlock();
    (*job)();
    job_mu_.Lock();
    job_ = nullptr;
    job_cv_.SignalAll();
  }
  job_mu_.Unlock();
}

void RingAllreduce::StartSending(const std::function<void()>& job) {
  absl::MutexLock l(&job_mu_);
  if (!sender_.joinable()) sender_ = std::thread([this] { SenderLoop(); });
  job_ = &job;
  job_cv_.SignalAll();
}

void RingAllreduce::WaitForSending() {
  absl::MutexLock l(&job_mu_);
  while (job_ != nullptr) job_cv_.Wait(&job_mu_);
}

void RingAllreduce::Shutdown() {
  right_.Shutdown();
  left_.Shutdown();
}

absl::Status RingAllreduce::AllreduceSum(std::span<float> data, const exchange::IoCheck& check) {
  ++seq_;
  const int n_ranks = world_;
  const int64_t n = static_cast<int64_t>(data.size());
  if (n_ranks == 1 || n == 0) return absl::OkStatus();
  // Segments balanced to within one element; every segment is cut into the
  // same number of chunks so step t's chunk c depends on step t-1's chunk c.
  auto seg_begin = [&](int i) { return n * i / n_ranks; };
  const int64_t max_seg = (n + n_ranks - 1) / n_ranks;
  const int64_t chunk_elems = std::max<int64_t>(1, options_.chunk_bytes / 4);
  const int64_t chunks = std::max<int64_t>(1, (max_seg + chunk_elems - 1) / chunk_elems);
  auto chunk = [&](int seg, int64_t c, bool reduce, bool round) {
    const int64_t b = seg_begin(seg), len = seg_begin(seg + 1) - b;
    Item it;
    it.offset = b + len * c / chunks;
    it.length = b + len * (c + 1) / chunks - it.offset;
    it.reduce = reduce;
    it.round_owned = round;
    return it;
  };
  const bool half = options_.dtype == v1::WIRE_DTYPE_F16;
  std::vector<Item> send, recv;
  std::vector<int64_t> dep;
  const int steps = 2 * (n_ranks - 1);
  send.reserve(static_cast<size_t>(steps * chunks));
  recv.reserve(send.capacity());
  dep.reserve(send.capacity());
  for (int t = 0; t < steps; ++t) {
    const bool scatter = t < n_ranks - 1;
    const int g = t - (n_ranks - 1);  // allgather step
    const int send_seg = scatter ? Mod(rank_ - t, n_ranks) : Mod(rank_ + 1 - g, n_ranks);
    const int recv_seg = scatter ? Mod(rank_ - t - 1, n_ranks) : Mod(rank_ - g, n_ranks);
    for (int64_t c = 0; c < chunks; ++c) {
      // The owner rounds its reduced segment before the first allgather
      // step, so every rank ends with the same fp16-rounded values.
      send.push_back(chunk(send_seg, c, false, half && g == 0));
      recv.push_back(chunk(recv_seg, c, scatter, false));
      dep.push_back(t == 0 ? -1 : (t - 1) * chunks + c);
    }
  }
  return Run(data, send, dep, recv, options_.dtype, check);
}

absl::Status RingAllreduce::Broadcast(std::span<float> data, int root,
                                      const exchange::IoCheck& check) {
  ++seq_;
  const int64_t n = static_cast<int64_t>(data.size());
  if (world_ == 1 || n == 0) return absl::OkStatus();
  if (root < 0 || root >= world_) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " outside the ring"));
  }
  const int64_t chunk_elems = std::max<int64_t>(1, options_.chunk_bytes / 4);
  const int64_t chunks = (n + chunk_elems - 1) / chunk_elems;
  const bool is_root = rank_ == root;
  const bool forwards = Mod(rank_ + 1, world_) != root;
  std::vector<Item> send, recv;
  std::vector<int64_t> dep;
  for (int64_t c = 0; c < chunks; ++c) {
    Item it;
    it.offset = c * chunk_elems;
    it.length = std::min(chunk_elems, n - it.offset);
    if (!is_root) recv.push_back(it);
    if (is_root || forwards) {
      send.push_back(it);
      dep.push_back(is_root ? -1 : c);
    }
  }
  return Run(data, send, dep, recv, v1::WIRE_DTYPE_F32, check);
}

absl::Status RingAllreduce::Run(std::span<float> data, const std::vector<Item>& send,
                                const std::vector<int64_t>& send_dep, const std::vector<Item>& recv,
                                v1::WireDType dtype, const exchange::IoCheck& check) {
  left_failed_ = right_failed_ = false;
  const ScopedFlushDenormals flush;  // the receiving half sums on the caller's thread
  const size_t esize = BytesPerElement(dtype);
  const bool half = dtype == v1::WIRE_DTYPE_F16;
  RunSync sync;
  // Both sides stop as soon as either fails or the caller's check does.
  auto guarded = [&]() -> absl::Status {
    {
      absl::MutexLock l(&sync.mu);
      if (sync.failed) return absl::CancelledError("the other direction of the ring failed");
    }
    return check ? check() : absl::OkStatus();
  };

  // The sending half runs on the ring's sender thread, the receiving half
  // here.
  const std::function<void()> send_loop = [&] {
    for (size_t i = 0; i < send.size(); ++i) {
      if (send_dep[i] >= 0) {
        sync.mu.Lock();
        while (!sync.failed && sync.processed <= send_dep[i]) {
          sync.cv.WaitWithTimeout(&sync.mu, absl::Milliseconds(100));
          if (!sync.failed && sync.processed <= send_dep[i] && check) {
            sync.mu.Unlock();
            absl::Status s = check();
            sync.mu.Lock();
            if (!s.ok()) {
              sync.send_status = s;
              sync.failed = true;
              sync.cv.SignalAll();
            }
          }
        }
        const bool failed = sync.failed;
        sync.mu.Unlock();
        if (failed) return;
      }
      const Item& it = send[i];
      float* src = data.data() + it.offset;
      const void* payload = src;
      if (half) {
        send_half_.resize(static_cast<size_t>(it.length));
        base::FloatsToHalves(src, static_cast<size_t>(it.length), send_half_.data());
        if (it.round_owned) {
          base::HalvesToFloats(send_half_.data(), static_cast<size_t>(it.length), src);
        }
        payload = send_half_.data();
      }
      ChunkHeader h{kChunkMagic, seq_, static_cast<uint32_t>(i),
                    static_cast<uint32_t>(static_cast<size_t>(it.length) * esize)};
      absl::Status s = right_.SendAll(&h, sizeof(h), payload, h.bytes, guarded);
      if (!s.ok()) {
        if (!absl::IsCancelled(s)) right_failed_ = true;
        absl::MutexLock l(&sync.mu);
        sync.send_status = std::move(s);
        sync.failed = true;
        sync.cv.SignalAll();
        return;
      }
      bytes_sent_ += static_cast<int64_t>(sizeof(h) + h.bytes);
    }
  };
  StartSending(send_loop);

  for (size_t i = 0; i < recv.size(); ++i) {
    const Item& it = recv[i];
    const size_t bytes = static_cast<size_t>(it.length) * esize;
    ChunkHeader h{};
    absl::Status s = left_.RecvAll(&h, sizeof(h), guarded);
    if (s.ok() && (h.magic != kChunkMagic || h.seq != seq_ || h.item != i || h.bytes != bytes)) {
      s = absl::DataLossError(absl::StrCat("allreduce stream out of step: expected chunk ", i,
                                           " of collective ", seq_, " (", bytes,
                                           " bytes), got magic ", h.magic, " chunk ", h.item,
                                           " of collective ", h.seq, " (", h.bytes, " bytes)"));
    }
    float* dst = data.data() + it.offset;
    if (s.ok() && !half && !it.reduce) {
      s = left_.RecvAll(dst, bytes, guarded);  // allgather fp32 lands in place
    } else if (s.ok()) {
      // Received and folded in pieces that stay in cache, so the sum reads
      // what the kernel just wrote instead of a whole chunk from memory.
      constexpr int64_t kPieceElements = 64 * 1024;
      recv_buf_.resize(static_cast<size_t>(std::min(it.length, kPieceElements)) * esize);
      for (int64_t at = 0; at < it.length && s.ok(); at += kPieceElements) {
        const int64_t n = std::min(kPieceElements, it.length - at);
        s = left_.RecvAll(recv_buf_.data(), static_cast<size_t>(n) * esize, guarded);
        if (!s.ok()) break;
        float* out = dst + at;
        if (half) {
          const uint16_t* in = reinterpret_cast<const uint16_t*>(recv_buf_.data());
          if (it.reduce) {
            base::AddHalvesTo(in, static_cast<size_t>(n), out);
          } else {
            base::HalvesToFloats(in, static_cast<size_t>(n), out);
          }
        } else {
          const float* in = reinterpret_cast<const float*>(recv_buf_.data());
          for (int64_t k = 0; k < n; ++k) out[k] += in[k];
        }
      }
    }
    if (!s.ok()) {
      if (!absl::IsCancelled(s)) left_failed_ = true;
      absl::MutexLock l(&sync.mu);
      sync.recv_status = std::move(s);
      sync.failed = true;
      sync.cv.SignalAll();
      break;
    }
    bytes_received_ += static_cast<int64_t>(sizeof(h) + bytes);
    absl::MutexLock l(&sync.mu);
    ++sync.processed;
    sync.cv.SignalAll();
  }
  WaitForSending();
  absl::Status send_status, recv_status;
  {
    absl::MutexLock l(&sync.mu);
    send_status = sync.send_status;
    recv_status = sync.recv_status;
  }
  // Report the root cause, not the other direction's cancellation.
  if (!recv_status.ok() && !absl::IsCancelled(recv_status)) return recv_status;
  if (!send_status.ok() && !absl::IsCancelled(send_status)) return send_status;
  if (!recv_status.ok()) return recv_status;
  return send_status;
}

}  // namespace kubetrain::allreduce
