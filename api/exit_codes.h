// Process exit codes shared by the runtime, the launcher and the operator
// (ARCHITECTURE: 0 done; 1-127 permanent; 128+ retryable).
#ifndef KUBETRAIN_API_EXIT_CODES_H_
#define KUBETRAIN_API_EXIT_CODES_H_

namespace kubetrain {

inline constexpr int kExitSuccess = 0;
// Bad configuration or data: restarting will not help.
inline constexpr int kExitPermanent = 1;
// A peer (parameter server or worker) was gone longer than --peer-timeout:
// restarting the replica may help.
inline constexpr int kExitPeerLost = 129;
// Killed or stopped by signal `sig`: 128 + sig.
inline constexpr int ExitForSignal(int sig) { return 128 + sig; }

inline constexpr bool IsRetryableExit(int code) { return code >= 128; }

}  // namespace kubetrain

#endif  // KUBETRAIN_API_EXIT_CODES_H_
