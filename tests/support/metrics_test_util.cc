#include "tests/support/metrics_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/subprocess.h"

namespace kubetrain::metrics::testing_util {

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path,
                                     std::chrono::milliseconds timeout, const std::string& method) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to 127.0.0.1:", port, ": ", err));
  }
  const std::string req =
      absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return absl::UnavailableError("send failed");
  }
  std::string raw;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[16384];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p = {fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) {
      close(fd);
      return absl::DeadlineExceededError(absl::StrCat("no full response from port ", port));
    }
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("not an HTTP response: ", raw.substr(0, 100)));
  }
  HttpResponse r;
  if (!absl::SimpleAtoi(raw.substr(9, 3), &r.status)) {
    return absl::DataLossError("bad status line");
  }
  r.body = raw.substr(head_end + 4);
  return r;
}

HttpResponse HttpTry(int port, const std::string& path, const std::string& method,
                     std::chrono::milliseconds timeout) {
  absl::StatusOr<HttpResponse> r = HttpGet(port, path, timeout, method);
  return r.ok() ? *std::move(r) : HttpResponse{};
}

std::multimap<std::string, double> ParseSamples(const std::string& text) {
  std::multimap<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    // The value follows the last space (label values may contain spaces,
    // but never the final space of the line; no timestamps here).
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    double v = 0;
    const std::string value = line.substr(sp + 1);
    if (value == "+Inf") {
      v = HUGE_VAL;
    } else if (value == "-Inf") {
      v = -HUGE_VAL;
    } else if (!absl::SimpleAtod(value, &v)) {
      continue;
    }
    out.emplace(line.substr(0, sp), v);
  }
  return out;
}

std::optional<double> SumSeries(const std::string& text, const std::string& name,
                                const std::set<std::string>& label_matchers) {
  std::optional<double> sum;
  for (const auto& [series, value] : ParseSamples(text)) {
    const std::string series_name = series.substr(0, series.find('{'));
    if (series_name != name) continue;
    bool all = true;
    for (const std::string& m : label_matchers) {
      all = all && series.find(m) != std::string::npos;
    }
    if (!all) continue;
    sum = sum.value_or(0) + value;
  }
  return sum;
}

std::set<std::string> SampleNames(const std::string& text) {
  std::set<std::string> names;
  for (const auto& [series, value] : ParseSamples(text)) {
    names.insert(series.substr(0, series.find('{')));
  }
  return names;
}

bool HavePromtool() {
  return ::kubetrain::testing_util::RunProcess({"/bin/sh", "-c", "command -v promtool"},
                                               std::chrono::seconds(10))
             .exit_code == 0;
}

PromtoolResult PromtoolCheckMetrics(const std::string& text) {
  char tmpl[] = "/tmp/kubetrain_scrape_XXXXXX";
  const int fd = mkstemp(tmpl);
  PromtoolResult r;
  if (fd < 0) {
    r.output = "mkstemp failed";
    return r;
  }
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    r.output = "write failed";
  }
  close(fd);
  const ::kubetrain::testing_util::ProcessResult p = ::kubetrain::testing_util::RunProcess(
      {"/bin/sh", "-c", absl::StrCat("promtool check metrics < ", tmpl)}, std::chrono::seconds(60));
  std::filesystem::remove(tmpl);
  r.exit_code = p.exit_code;
  r.output = p.out + p.err;
  return r;
}

}  // namespace kubetrain::metrics::testing_util
