// Parameter-server update modes: sync (one averaged update per step, with
// optional backup workers), async (apply as gradients arrive), ssp:<s>
// (async, but no worker runs more than s steps ahead of the slowest).
// Value type; thread-safe for reads.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_EXCHANGE_MODE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_EXCHANGE_MODE_H_

#include <string>

#include "absl/status/statusor.h"

namespace kubetrain::ps {

struct ExchangeMode {
  enum Kind { kSync, kAsync, kSsp } kind = kSync;
  int ssp_bound = 0;

  std::string ToString() const;
  static absl::StatusOr<ExchangeMode> Parse(const std::string& text);  // sync|async|ssp:<s>
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_EXCHANGE_MODE_H_
