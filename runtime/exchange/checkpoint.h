// Checkpoints of a range of the flat parameter vector (a parameter-server
// shard, or the whole vector for allreduce jobs, written by rank 0): the range,
// optimizer state and its clocks, in one file per checkpoint:
//   "KTCKPT01" | u32 header length | CheckpointHeader (proto) |
//   params floats | each optimizer state's floats | u32 crc32 of all before
// (integers and floats little-endian: base/little_endian.h).
// The header may carry the data position (data_epoch, data_cursor: the
// BatchSampler's epoch and world-wide cursor); DataPositionOf reads it.
// Files are <dir>/shard-<i>-of-<n>/ckpt-<global step, 12 digits>.ktc, written
// to a temporary name, fsynced and renamed, so a crash never leaves a
// half-written checkpoint under a real name. Functions are thread-safe for
// distinct directories.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_CHECKPOINT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kubetrain/v1/parameter_server.pb.h"
#include "runtime/exchange/data_position.h"

namespace kubetrain::exchange {

// The header's data position, or nullopt when it has none: a checkpoint
// written before the fields existed or by a writer that does not know the
// position (PS shards). Then derive it from global_step as a fixed world
// does: BatchSampler::SetPosition(step / batches_per_epoch, step %
// batches_per_epoch). ReadCheckpoint refuses a header with only one of the
// two fields or a negative one, so a header it returned has both or
// neither.
std::optional<DataPosition> DataPositionOf(const v1::CheckpointHeader& header);
// Sets both fields.
void SetDataPosition(const DataPosition& position, v1::CheckpointHeader& header);

struct CheckpointView {
  v1::CheckpointHeader header;
  std::span<const float> params;
  std::vector<std::span<const float>> states;  // in header.state_names order
};

struct CheckpointData {
  v1::CheckpointHeader header;
  std::vector<float> params;
  std::vector<std::vector<float>> states;
  std::string path;
  std::optional<DataPosition> data_position;  // DataPositionOf(header)
};

std::string ShardCheckpointDir(const std::string& dir, int shard_index, int num_shards);

// Writes a checkpoint and keeps only the newest `keep` of this shard.
// Returns the file's path.
absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, const CheckpointView& ckpt,
                                            int keep);

// Reads and verifies one checkpoint file (magic, sizes, checksum, a data
// position with both fields >= 0 or none).
absl::StatusOr<CheckpointData> ReadCheckpoint(const std::string& path);

// The newest checkpoint of the shard that verifies; corrupt or truncated
// ones are reported through `warn` and skipped. NotFound when none is valid.
absl::StatusOr<CheckpointData> LoadLatestCheckpoint(
    const std::string& dir, int shard_index, int num_shards,
    const std::function<void(const std::string&)>& warn);

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_CHECKPOINT_H_
