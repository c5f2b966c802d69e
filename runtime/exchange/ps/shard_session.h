// ShardSession: the server side of a parameter-server step, written once
// for every transport that carries it (as ps-lite's KVServer serves
// whatever Van brings). The gRPC service (grpc_shard_server.h) and the direct TCP
// data plane (tcp_shard_server.h) only frame: they parse their bytes, hand
// the session what a step says (who pushes, for which step and
// incarnation, where each chunk goes, its NaN/Inf count and checksum), and
// write back what it answers. Every check of a step is here:
//  - the job token: a writer's refusal is counted as bad_token;
//  - the incarnation: a typed kStaleIncarnation refusal (ps_refusal.h);
//  - the worker, the push's declared extent and each chunk's place in this
//    shard's range (bad_range, bad_header), its checksum (bad_chunk), its
//    NaN/Inf count (the shard's CommitPush/PushChunk: non_finite);
//  - a PushPull step's pull naming its own pusher (bad_header).
// A push is staged into the worker's slot (PsShard::BeginStaging) and
// committed only when every check passed (StagedPush::Commit). A push that
// fails, or is dropped unfinished, commits nothing: the slot is released
// and a pipelined push's chunks are taken back (PsShard::AbortPush).
// Reads wait as the mode says (PsShard::Read) and hand out the parameters
// under the shard's lock, or pinned for a zero-copy send.
// Metrics: the tensor bytes of whole pushes received and of pulls sent;
// rejections with their reasons (logged by the shard).
//
// Thread-safe: a ShardSession holds nothing that changes; it borrows the
// shard and the metrics, which must outlive it. A StagedPush is
// thread-compatible: one transport thread feeds it.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_SESSION_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_SESSION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/exchange/ps/ps_shard.h"
#include "runtime/exchange/ps/shard_range.h"
#include "runtime/metrics/runtime_metrics.h"

namespace kubetrain::ps {

// What a push says of itself before its values (a transport's header).
struct PushHead {
  int worker = 0;
  int64_t step = 0;  // the worker's clock for this gradient
  uint64_t incarnation = 0;
  // The starting parameters (Initialize), not a gradient.
  bool initialize = false;
  int64_t total_steps = 0;  // initialize: the job's length
  // The worker the transport's connection belongs to (the data plane's
  // hello): a step of another worker is refused. nullopt: any.
  std::optional<int> connection_worker;
  // The extent the push declares before its values (the data plane): it is
  // refused before any value is read unless it is this shard's range.
  // nullopt: each chunk says where it goes (gRPC).
  std::optional<Range> extent;
  // Chunks are handed to the shard as they arrive (PsShard::PushChunk).
  bool pipelined = false;
  // The push ends with the same step's pull request (PushPull), which must
  // name the pushing worker (StagedPush::PullArrived).
  bool ends_with_pull = false;
};

// The answer to a push.
struct PushAnswer {
  // The shard took it; false: a duplicate of a committed push or a stale
  // gradient, dropped (not an error).
  bool accepted = false;
  int64_t global_step = 0;
  uint64_t incarnation = 0;
};

// What a pull asks for.
struct PullAsk {
  int worker = kObserver;
  uint64_t incarnation = 0;  // 0: not checked (callers from before incarnations)
  int64_t min_step = 0;
  int64_t clock = 0;
};

// Parameters read for a zero-copy send: `result.pin` keeps `values`
// unchanged (the shard's next update writes a copy) until it is dropped.
struct PinnedParams {
  PullResult result;
  std::span<const float> values;
};

class ShardSession;

// One push in progress, from BeginPush to Commit. The transport places each
// chunk (Place), receives its values where Place says, checks them and
// reports them (Arrived, CheckCrc, or Fail), then commits. The first
// failure sticks: later calls return it and Commit commits nothing.
class StagedPush {
 public:
  StagedPush(StagedPush&& other) noexcept;
  StagedPush& operator=(StagedPush&&) = delete;
  StagedPush(const StagedPush&) = delete;
  StagedPush& operator=(const StagedPush&) = delete;
  ~StagedPush();  // Release()

  const PushHead& head() const { return head_; }
  // A repeat of a push already committed (a retry): its values are read
  // and dropped, it commits nothing and is answered not accepted.
  bool duplicate() const { return duplicate_; }

  // The next chunk covers [offset, offset + length) of the model: it must
  // continue where the previous one ended, inside this shard's range
  // (bad_range otherwise). Returns where its values go, in the worker's
  // slot; empty when they are dropped (a duplicate, or a pipelined push
  // found stale): the transport reads them into scratch space.
  absl::StatusOr<std::span<float>> Place(int64_t offset, int64_t length);
  // The placed chunk arrived whole: `wire_bytes` on the wire, `nonfinite`
  // of its values NaN/Inf (the transport counts them while the values are
  // in cache; ignored for a duplicate). A pipelined push hands the chunk to
  // the shard now (PsShard::PushChunk), which may refuse it; a stale one's
  // chunks are only checked for NaN/Inf (non_finite).
  absl::Status Arrived(int64_t nonfinite, int64_t wire_bytes);
  // The CRC-32C of the bytes received (since the last check: a data-plane
  // push's payload, or a pipelined chunk) against the one the sender sent:
  // DataLoss (bad_chunk) when they differ.
  absl::Status CheckCrc(uint32_t received, uint32_t sent);
  // The PushPull step's pull request arrived, for `worker`: it ends the push.
  void PullArrived(int worker);
  // The transport found the push bad, or lost it: nothing is committed.
  // Counted as `reason` (not when nullopt, as a broken connection, nor for
  // a duplicate). Returns `why`. Every failure (of the other calls too)
  // releases the slot at once, before the worker is told and retries; a
  // pipelined push's chunks are taken back at once, its slot released by
  // Release() once the transport stopped sending its round.
  absl::Status Fail(absl::Status why, std::optional<metrics::RejectReason> reason);
  // A duplicate's answer without reading the rest of it (a whole stream).
  PushAnswer Drop();
  // Every chunk arrived: checks the push covered the range (and ended with
  // its pull, ends_with_pull), then commits it (CommitInitialize or
  // CommitPush; a pipelined push's round commits in the shard as chunks
  // arrive) and counts its bytes. Releases the slot, except a pipelined
  // push's: the transport releases that once the round has been sent.
  // The push's failure, or the shard's refusal, commits nothing.
  absl::StatusOr<PushAnswer> Commit();
  // Ends the push: an uncommitted one commits nothing (a pipelined push's
  // chunks are taken back), and the worker's slot is free for its next.
  void Release();

 private:
  friend class ShardSession;
  StagedPush(const ShardSession& session, const PushHead& head, Range range, std::span<float> slot,
             bool duplicate);
  absl::Status Failed(absl::Status why, std::optional<metrics::RejectReason> reason);

  const ShardSession* session_;
  PushHead head_;
  Range range_;
  std::span<float> slot_;
  bool duplicate_ = false;
  bool staged_ = false;     // holds the worker's slot (PsShard::BeginStaging)
  bool committed_ = false;  // Commit succeeded: nothing to take back
  bool taking_ = true;      // pipelined: the shard still takes its chunks
  absl::Status failure_;
  int64_t covered_ = 0;  // values placed so far
  int64_t chunk_ = -1;   // the index of the chunk placed last
  int64_t nonfinite_ = 0;
  int64_t wire_bytes_ = 0;
  std::optional<int> pull_worker_;
};

class ShardSession {
 public:
  // `token` empty: no authentication (api::kEnvJobToken unset). `metrics`
  // (borrowed, may be null) counts the tensor bytes moved.
  ShardSession(PsShard& shard, std::string token, metrics::RuntimeMetrics* metrics = nullptr);
  ShardSession(const ShardSession&) = delete;
  ShardSession& operator=(const ShardSession&) = delete;

  // For the control calls (registration, done, checkpoints, status).
  PsShard& shard() const { return shard_; }
  uint64_t incarnation() const { return shard_.options().incarnation; }
  Range range() const { return shard_.range(); }

  // The token check of a peer that joins or pushes: a refusal is counted as
  // a rejected push (bad_token) and logged as `who`: message, since it is
  // another job's worker or a stranger trying to write to this shard.
  absl::Status AdmitWriter(absl::string_view presented, absl::string_view who) const;
  // Of a peer that only reads or asks (pulls, done, status): not counted.
  absl::Status AdmitReader(absl::string_view presented) const;
  // A data-plane connection's hello: its token (as a writer's), the
  // incarnation it registered with, and its worker (a training replica).
  absl::Status AdmitConnection(int worker, uint64_t incarnation, absl::string_view token) const;

  // Counts and logs a push the transport refused itself (bytes that are no
  // header, a connection beyond the cap); `context` prefixes the log line.
  // Returns `why`.
  absl::Status Reject(metrics::RejectReason reason, absl::Status why,
                      absl::string_view context = {}) const;

  // Checks the head (worker, incarnation, extent, pipelining) and stages
  // the push into the worker's slot. An unknown worker is counted
  // (unknown_worker); a shard that restarted is a typed refusal.
  absl::StatusOr<StagedPush> BeginPush(const PushHead& head) const;

  // Checks the ask (incarnation, worker, a layout to read), waits as the
  // mode says, then calls `read` under the shard's lock (PsShard::Read).
  absl::StatusOr<PullResult> Read(const PullAsk& ask, const PsShard::ParamsReader& read,
                                  const std::function<bool()>& cancelled) const;
  // The same, the parameters pinned for a send without the lock.
  absl::StatusOr<PinnedParams> ReadPinned(const PullAsk& ask,
                                          const std::function<bool()>& cancelled) const;
  // A pipelined step's round, as PsShard::WaitRound.
  absl::StatusOr<RoundRead> WaitRound(int worker, int64_t step, uint64_t attempt, int64_t sent,
                                      const std::function<bool()>& cancelled) const;

  // A pull's tensor bytes went out to `worker` (kObserver: an evaluator).
  void CountSent(int worker, int64_t wire_bytes) const;

 private:
  friend class StagedPush;
  void CountReceived(int64_t wire_bytes) const;

  PsShard& shard_;
  const std::string token_;
  metrics::RuntimeMetrics* const metrics_;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_SESSION_H_
