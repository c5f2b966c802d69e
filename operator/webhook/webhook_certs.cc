#include "operator/webhook/webhook_certs.h"

#include <arpa/inet.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/api_error.h"
#include "operator/kube/resource.h"

namespace kubetrain::webhook {
namespace {

using kube::Json;

bool IsIpAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The certificate a Secret holds; nullopt when it has none that parses.
std::optional<kube::ServingCert> FromSecret(const Json& secret) {
  const Json data = secret.value("data", Json::object());
  if (!data.is_object() || !data.contains("tls.crt") || !data.contains("tls.key") ||
      !data["tls.crt"].is_string() || !data["tls.key"].is_string()) {
    return std::nullopt;
  }
  kube::ServingCert cert;
  if (!absl::Base64Unescape(data["tls.crt"].get<std::string>(), &cert.cert_pem) ||
      !absl::Base64Unescape(data["tls.key"].get<std::string>(), &cert.key_pem)) {
    return std::nullopt;
  }
  return cert;
}

Json SecretData(const kube::ServingCert& cert) {
  return {{"tls.crt", absl::Base64Escape(cert.cert_pem)},
          {"tls.key", absl::Base64Escape(cert.key_pem)},
          // Self-signed: the certificate is its own CA.
          {"ca.crt", absl::Base64Escape(cert.cert_pem)}};
}

}  // namespace

kube::ServingCertRequest CertRequestFor(const WebhookCertOptions& options) {
  kube::ServingCertRequest r;
  const std::string svc = absl::StrCat(options.service_name, ".", options.ns, ".svc");
  r.common_name = svc;
  r.dns_names = {svc, absl::StrCat(svc, ".cluster.local"),
                 absl::StrCat(options.service_name, ".", options.ns), options.service_name};
  for (const std::string& h : options.extra_hosts) {
    (IsIpAddress(h) ? r.ip_addresses : r.dns_names).push_back(h);
  }
  return r;
}

absl::StatusOr<kube::ServingCert> EnsureServingCert(kube::KubeClient& client,
                                                    const WebhookCertOptions& options,
                                                    absl::Time now, kube::Logger& log) {
  const kube::ServingCertRequest request = CertRequestFor(options);
  const std::string where = absl::StrCat("secret ", options.ns, "/", options.secret_name);
  for (int attempt = 0; attempt < 5; ++attempt) {
    absl::StatusOr<Json> secret = client.Get(kube::kSecrets, options.ns, options.secret_name);
    if (!secret.ok() && !absl::IsNotFound(secret.status())) {
      return absl::Status(secret.status().code(),
                          absl::StrCat("reading ", where, ": ", secret.status().message()));
    }
    if (secret.ok()) {
      if (std::optional<kube::ServingCert> held = FromSecret(*secret)) {
        absl::Status good = kube::CheckServingCert(*held, request, now, kRenewBefore);
        if (good.ok()) return *held;
        log.Info("webhook", absl::StrCat("the certificate in ", where, " is not good (",
                                         good.message(), "): making a new one"));
      } else {
        log.Info("webhook", absl::StrCat(where, " holds no certificate: making one"));
      }
    }
    absl::StatusOr<kube::ServingCert> made = kube::GenerateServingCert(request, now);
    if (!made.ok()) return made.status();
    absl::StatusOr<Json> written;
    if (secret.ok()) {
      Json updated = *secret;
      updated["type"] = "kubernetes.io/tls";
      updated["data"] = SecretData(*made);
      written = client.Update(kube::kSecrets, updated);
    } else {
      Json created = {{"apiVersion", "v1"},
                      {"kind", "Secret"},
                      {"metadata",
                       {{"name", options.secret_name},
                        {"namespace", options.ns},
                        {"labels",
                         {{"app.kubernetes.io/name", "kubetrain"},
                          {"app.kubernetes.io/component", "webhook"}}}}},
                      {"type", "kubernetes.io/tls"},
                      {"data", SecretData(*made)}};
      written = client.Create(kube::kSecrets, options.ns, created);
    }
    if (written.ok()) {
      log.Info("webhook", absl::StrCat("stored a new serving certificate for ", request.common_name,
                                       " in ", where));
      return *made;
    }
    // Another replica wrote it first: read theirs.
    if (absl::IsAlreadyExists(written.status()) || kube::IsConflict(written.status())) continue;
    return absl::Status(written.status().code(),
                        absl::StrCat("writing ", where, ": ", written.status().message()));
  }
  return absl::AbortedError(absl::StrCat(where, " kept changing while this operator wrote it"));
}

absl::Status InjectCaBundle(kube::KubeClient& client, const std::string& config_name,
                            const std::string& ca_pem, kube::Logger& log) {
  const std::string bundle = absl::Base64Escape(ca_pem);
  for (int attempt = 0; attempt < 5; ++attempt) {
    absl::StatusOr<Json> config =
        client.Get(kube::kValidatingWebhookConfigurations, "", config_name);
    if (!config.ok()) {
      return absl::Status(config.status().code(),
                          absl::StrCat("reading validatingwebhookconfiguration ", config_name, ": ",
                                       config.status().message()));
    }
    Json updated = *config;
    bool changed = false;
    if (updated.contains("webhooks") && updated["webhooks"].is_array()) {
      for (Json& w : updated["webhooks"]) {
        if (!w.is_object()) continue;
        Json& cc = w["clientConfig"];
        if (!cc.is_object()) cc = Json::object();
        if (cc.value("caBundle", std::string()) != bundle) {
          cc["caBundle"] = bundle;
          changed = true;
        }
      }
    }
    if (!changed) return absl::OkStatus();
    absl::StatusOr<Json> written = client.Update(kube::kValidatingWebhookConfigurations, updated);
    if (written.ok()) {
      log.Info("webhook",
               absl::StrCat("set the caBundle of validatingwebhookconfiguration ", config_name));
      return absl::OkStatus();
    }
    if (kube::IsConflict(written.status())) continue;
    return absl::Status(written.status().code(),
                        absl::StrCat("updating validatingwebhookconfiguration ", config_name, ": ",
                                     written.status().message()));
  }
  return absl::AbortedError(
      absl::StrCat("validatingwebhookconfiguration ", config_name, " kept changing"));
}

}  // namespace kubetrain::webhook
