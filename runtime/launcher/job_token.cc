#include "runtime/launcher/job_token.h"

#include <sys/random.h>

#include <cerrno>
#include <random>
#include <vector>

namespace kubetrain::launcher {

std::string NewJobToken(int bytes) {
  std::vector<unsigned char> raw(static_cast<size_t>(bytes));
  size_t got = 0;
  while (got < raw.size()) {
    const ssize_t n = getrandom(raw.data() + got, raw.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < raw.size()) {  // no getrandom(): fall back to std::random_device
    std::random_device rd;
    for (size_t i = got; i < raw.size(); ++i) raw[i] = static_cast<unsigned char>(rd());
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xF]);
  }
  return out;
}

}  // namespace kubetrain::launcher
