// NewJobToken: a random per-job secret (api::kEnvJobToken) as lower-case
// hex, from the operating system's random source. Thread-safe.
#ifndef KUBETRAIN_RUNTIME_LAUNCHER_JOB_TOKEN_H_
#define KUBETRAIN_RUNTIME_LAUNCHER_JOB_TOKEN_H_

#include <string>

namespace kubetrain::launcher {

// 2 * bytes hex characters; the default gives 32.
std::string NewJobToken(int bytes = 16);

}  // namespace kubetrain::launcher

#endif  // KUBETRAIN_RUNTIME_LAUNCHER_JOB_TOKEN_H_
