#include "operator/webhook/webhook_server.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace kubetrain::webhook {

absl::StatusOr<nlohmann::json> Admit(const std::string& review, const JobLookup& lookup,
                                     kube::Logger& log) {
  absl::StatusOr<AdmissionRequest> request = ParseAdmissionReview(review);
  if (!request.ok()) return request.status();
  const AdmissionVerdict verdict = ReviewTrainingJob(*request, lookup);
  const std::string what =
      absl::StrCat(request->operation, " ", request->resource,
                   request->sub_resource.empty() ? "" : "/", request->sub_resource, " ",
                   request->ns, "/", request->name, request->dry_run ? " (dry run)" : "");
  if (!verdict.allowed) {
    log.Info("webhook", absl::StrCat("refused ", what, ": ", verdict.message));
  } else {
    for (const std::string& w : verdict.warnings) {
      log.Warning("webhook", absl::StrCat("allowed ", what, " unchecked: ", w));
    }
  }
  return AdmissionResponse(request->uid, verdict);
}

absl::StatusOr<std::unique_ptr<WebhookServer>> WebhookServer::Start(
    const kube::HttpsServerOptions& options, JobLookup lookup, kube::Logger& log) {
  std::unique_ptr<WebhookServer> server(new WebhookServer());
  absl::StatusOr<std::unique_ptr<kube::HttpsServer>> https = kube::HttpsServer::Start(
      options, [lookup = std::move(lookup), &log](const kube::HttpsRequest& request,
                                                  kube::HttpsReply& reply) {
        if (request.path != kValidatePath) {
          reply.Fail(404, absl::StrCat("no webhook at ", request.path,
                                       "; kubetrain-operator serves ", kValidatePath, "\n"));
          return;
        }
        if (request.method != "POST") {
          reply.Fail(405, "POST an admission.k8s.io/v1 AdmissionReview\n");
          return;
        }
        absl::StatusOr<nlohmann::json> answer = Admit(request.body, lookup, log);
        if (!answer.ok()) {
          log.Warning("webhook", absl::StrCat("a bad request: ", answer.status().message()));
          reply.Fail(400, absl::StrCat(answer.status().message(), "\n"));
          return;
        }
        reply.Respond(200, "application/json", answer->dump());
      });
  if (!https.ok()) return https.status();
  server->server_ = *std::move(https);
  return server;
}

}  // namespace kubetrain::webhook
