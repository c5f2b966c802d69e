// RingAllreduce: bandwidth-optimal collectives over a ring of `world` ranks
// (Patarasuk & Yuan; the ring Horovod, Gloo and NCCL use), on this rank's
// two TCP links: `right` to rank+1 and `left` from rank-1.
//
// AllreduceSum is a reduce-scatter then an allgather: 2(N-1) steps, each
// rank sending 2(N-1)/N of the data. Each of the N segments is cut into
// chunks; a sender thread (kept for the ring's life) and the receiving
// (calling) thread work on
// different chunks at once, so sending, receiving and summing overlap and a
// chunk moves on to the next rank as soon as it has been reduced. Every
// chunk carries a 16-byte header (magic, collective number, position, size)
// that the receiver checks, so a desynchronised or corrupt stream fails
// with a clear error instead of silently mixing data.
//
// With fp16 on the wire, partial sums are rounded to binary16 at each hop
// and the owner rounds its final segment too before sharing it, so every
// rank ends with identical values; per element the error is at most
// N * (2^-11 * sum_i |x_i| + 2^-25) (values beyond 65504 become inf).
//
// Not thread-safe: one collective at a time. Failures name the side that
// failed (left_failed() / right_failed()).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RING_ALLREDUCE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RING_ALLREDUCE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "kubetrain/v1/tensor.pb.h"
#include "runtime/exchange/allreduce/collective.h"
#include "runtime/exchange/tcp_link.h"

namespace kubetrain::allreduce {

struct RingOptions {
  // Bytes of float32 data per chunk (the pipelining grain).
  int64_t chunk_bytes = 1 << 20;
  v1::WireDType dtype = v1::WIRE_DTYPE_F32;  // of AllreduceSum; Broadcast is always exact
};

class RingAllreduce final : public Collective {
 public:
  // world == 1 needs no links (every collective is a no-op).
  RingAllreduce(int rank, int world, exchange::TcpConnection right, exchange::TcpConnection left,
                RingOptions options);
  ~RingAllreduce() override;
  RingAllreduce(const RingAllreduce&) = delete;
  RingAllreduce& operator=(const RingAllreduce&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }

  std::string name() const override { return "ring"; }
  // data <- elementwise sum of every rank's data (same size on all ranks).
  absl::Status AllreduceSum(std::span<float> data, const exchange::IoCheck& check) override;
  // data <- root's data, bit for bit.
  absl::Status Broadcast(std::span<float> data, int root, const exchange::IoCheck& check) override;
  int failed_peer() const override {
    return left_failed_ ? (rank_ + world_ - 1) % world_ : right_failed_ ? (rank_ + 1) % world_ : -1;
  }

  // Which link failed in the last failed collective.
  bool left_failed() const { return left_failed_; }
  bool right_failed() const { return right_failed_; }

  int64_t bytes_sent() const override { return bytes_sent_.load(); }
  int64_t bytes_received() const override { return bytes_received_.load(); }

  // Unblocks a collective in flight from another thread; later ones fail.
  void Shutdown() override;

  // Test hook: emulate a slow link to the right neighbour.
  void set_max_send_rate(double bytes_per_second) { right_.set_max_send_rate(bytes_per_second); }

 private:
  struct Item {
    int64_t offset = 0;  // elements into data
    int64_t length = 0;
    bool reduce = false;       // receive: add (reduce-scatter) or copy (allgather)
    bool round_owned = false;  // send: round the owned segment first (fp16)
  };
  // Sends items[i] for every i in `send` order and receives `recv` items,
  // where send item i may go only after receive item dep[i] was processed
  // (-1: at once).
  absl::Status Run(std::span<float> data, const std::vector<Item>& send,
                   const std::vector<int64_t>& send_dep, const std::vector<Item>& recv,
                   v1::WireDType dtype, const exchange::IoCheck& check);

  // The sender thread, started with the first collective and reused: it
  // runs one collective's send loop at a time.
  void StartSending(const std::function<void()>& job) ABSL_LOCKS_EXCLUDED(job_mu_);
  void WaitForSending() ABSL_LOCKS_EXCLUDED(job_mu_);
  void SenderLoop() ABSL_LOCKS_EXCLUDED(job_mu_);

  const int rank_, world_;
  // A thread may send on right_ while another receives on left_ (tcp_link.h);
  // Shutdown() may be called from any thread.
  exchange::TcpConnection right_, left_;
  const RingOptions options_;
  // Not guarded: the calling thread writes these between collectives and
  // the sender thread reads or writes them only while it runs the
  // collective's send loop; job_mu_ orders the two (StartSending hands the
  // job over, WaitForSending takes it back).
  uint32_t seq_ = 0;
  bool left_failed_ = false, right_failed_ = false;
  std::atomic<int64_t> bytes_sent_{0}, bytes_received_{0};  // atomics
  std::vector<uint16_t> send_half_;                         // fp16 staging, sender thread only
  std::vector<char> recv_buf_;                              // receiving (calling) thread only
  absl::Mutex job_mu_;
  absl::CondVar job_cv_;  // with job_mu_: a job handed over, done, or quit_
  const std::function<void()>* job_ ABSL_GUARDED_BY(job_mu_) = nullptr;
  bool quit_ ABSL_GUARDED_BY(job_mu_) = false;
  // Not guarded: started (under job_mu_) and joined by the calling thread only.
  std::thread sender_;
};

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RING_ALLREDUCE_H_
