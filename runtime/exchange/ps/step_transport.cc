#include "runtime/exchange/ps/step_transport.h"

#include "runtime/exchange/ps/ps_refusal.h"

namespace kubetrain::ps {

StepError StepErrorOf(const absl::Status& s) {
  if (s.ok()) return StepError::kNone;
  switch (PsRefusalOf(s)) {
    case PsRefusal::kStaleIncarnation:
      return StepError::kShardRestarted;
    case PsRefusal::kUninitialised:
      return StepError::kUninitialised;
    case PsRefusal::kNone:
      break;
  }
  // Transport trouble, including a chunk that failed its checksum.
  if (absl::IsUnavailable(s) || absl::IsDataLoss(s) || absl::IsDeadlineExceeded(s) ||
      absl::IsCancelled(s) || absl::IsUnknown(s) || absl::IsInternal(s)) {
    return StepError::kUnavailable;
  }
  return StepError::kRefused;
}

}  // namespace kubetrain::ps
