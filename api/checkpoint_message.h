// The line a replica stopped by SIGTERM/SIGINT leaves as its container's
// termination message once it has written (or, on ranks that write none,
// not written) its checkpoint, and the operator's reading of it
// (status.lastCheckpoint):
//   kubetrain: checkpoint step=1200 path=/ckpt/ckpt-000000001200.ckpt
// `path` is the rest of the line (it may hold spaces). Both programs link
// this one definition. Pure functions, thread-safe.
#ifndef KUBETRAIN_API_CHECKPOINT_MESSAGE_H_
#define KUBETRAIN_API_CHECKPOINT_MESSAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kubetrain::api {

inline constexpr char kCheckpointMessagePrefix[] = "kubetrain: checkpoint step=";

struct CheckpointMessage {
  int64_t step = 0;
  std::string path;
  bool operator==(const CheckpointMessage&) const = default;
};

// "kubetrain: checkpoint step=<step> path=<path>" (no newline).
std::string FormatCheckpointMessage(const CheckpointMessage& m);

// The last line of `message` that is a checkpoint line (a termination
// message may hold log lines before it: FallbackToLogsOnError); nullopt
// when none is, or its step is not a non-negative integer or its path is
// empty.
std::optional<CheckpointMessage> ParseCheckpointMessage(std::string_view message);

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_CHECKPOINT_MESSAGE_H_
