#include "operator/health_server.h"

#include <civetweb.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "operator/metrics/civetweb_stop.h"

namespace kubetrain::operator_main {
namespace {

void Reply(mg_connection* conn, bool head, int code, const char* reason, const std::string& body) {
  const std::string headers = absl::StrCat(
      "HTTP/1.1 ", code, " ", reason,
      "\r\nContent-Type: text/plain; charset=utf-8\r\nCache-Control: no-cache, private\r\n"
      "X-Content-Type-Options: nosniff\r\nContent-Length: ",
      body.size(), "\r\nConnection: close\r\n\r\n");
  mg_write(conn, headers.data(), headers.size());
  if (!head) mg_write(conn, body.data(), body.size());
}

// The answer for one check: 200 "ok" or `failure_code` with the reason.
// Returns the code sent.
int ReplyCheck(mg_connection* conn, bool head, const std::function<absl::Status()>& check,
               int failure_code, const char* failure_reason) {
  const absl::Status s = check ? check() : absl::OkStatus();
  if (s.ok()) {
    Reply(conn, head, 200, "OK", "ok\n");
    return 200;
  }
  Reply(conn, head, failure_code, failure_reason, absl::StrCat(s.message(), "\n"));
  return failure_code;
}

// civetweb's own messages go nowhere: failures reach the caller as Status.
int QuietLog(const mg_connection*, const char*) { return 1; }

}  // namespace

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    const std::string& listening_ports, const std::string& display, HealthChecks checks) {
  std::unique_ptr<HealthServer> server(new HealthServer(std::move(checks)));
  mg_init_library(0);
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = &QuietLog;
  const char* options[] = {"listening_ports", listening_ports.c_str(), "num_threads", "2", nullptr};
  mg_init_data init;
  std::memset(&init, 0, sizeof(init));
  init.callbacks = &callbacks;
  init.user_data = server.get();
  init.configuration_options = options;
  char error_text[256] = {0};
  mg_error_data error;
  std::memset(&error, 0, sizeof(error));
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    mg_exit_library();
    return absl::UnavailableError(absl::StrCat("cannot serve health probes on ", display, ": ",
                                               error_text[0] != 0 ? error_text : "start failed"));
  }
  mg_set_request_handler(server->context_, "/", &HealthServer::Handle, server.get());
  mg_server_port ports[4];
  const int n = mg_get_server_ports(server->context_, 4, ports);
  if (n < 1) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve health probes on ", display, ": no listening port"));
  }
  server->port_ = ports[0].port;
  server->host_ = operator_metrics::CivetwebHost(listening_ports);
  return server;
}

HealthServer::~HealthServer() {
  if (context_ != nullptr) {
    operator_metrics::StopCivetwebPromptly(host_, port_, [this] { mg_stop(context_); });
    mg_exit_library();
  }
}

int HealthServer::Handle(mg_connection* conn, void* self_ptr) {
  const HealthServer& self = *static_cast<const HealthServer*>(self_ptr);
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string method = info->request_method != nullptr ? info->request_method : "";
  const std::string path = info->local_uri != nullptr ? info->local_uri : "";
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    Reply(conn, false, 405, "Method Not Allowed", "only GET and HEAD\n");
    return 405;
  }
  if (path == "/healthz")
    return ReplyCheck(conn, head, self.checks_.live, 500, "Internal Server Error");
  if (path == "/readyz")
    return ReplyCheck(conn, head, self.checks_.ready, 503, "Service Unavailable");
  Reply(conn, head, 404, "Not Found", "probes are at /healthz and /readyz\n");
  return 404;  // civetweb: a status code means this handler answered
}

}  // namespace kubetrain::operator_main
