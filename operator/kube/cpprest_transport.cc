#include "operator/kube/cpprest_transport.h"

#include <cpprest/http_client.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl.hpp>
#include <exception>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::kube {
namespace {

namespace http = web::http;
namespace client = web::http::client;

// Counts PEM certificates in `pem`; 0 when none parse.
int CountCertificates(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return 0;
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_free(cert);
    ++count;
  }
  BIO_free(bio);
  return count;
}

// True when the key belongs to the first certificate of `cert_pem`.
bool KeyMatchesCertificate(const std::string& cert_pem, const std::string& key_pem) {
  BIO* cert_bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  BIO* key_bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  X509* cert = cert_bio ? PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr) : nullptr;
  EVP_PKEY* key = key_bio ? PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr) : nullptr;
  bool match = cert != nullptr && key != nullptr && X509_check_private_key(cert, key) == 1;
  if (cert != nullptr) X509_free(cert);
  if (key != nullptr) EVP_PKEY_free(key);
  if (cert_bio != nullptr) BIO_free(cert_bio);
  if (key_bio != nullptr) BIO_free(key_bio);
  return match;
}

// cpprest reports every certificate problem as "Error in SSL handshake".
std::string Explain(const std::string& what) {
  if (what.find("SSL handshake") == std::string::npos) return what;
  return absl::StrCat(what,
                      " (TLS: is the server's certificate signed by the configured CA and valid "
                      "for this host name? see certificate-authority(-data) and "
                      "insecure-skip-tls-verify in the kubeconfig)");
}

bool IsPrivateKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return false;
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr) return false;
  EVP_PKEY_free(key);
  return true;
}

std::string What(const HttpRequest& request) {
  return absl::StrCat(request.method, " ", request.target);
}

}  // namespace

struct CpprestTransport::Impl {
  KubeConfig config;
  TransportOptions options;
  BearerTokenSource tokens;
  std::unique_ptr<client::http_client> client;

  Impl(const KubeConfig& c, const TransportOptions& o, const ConfigEnvironment& env,
       const Clock& clock)
      : config(c), options(o), tokens(c.token, c.token_file, env, clock) {}

  client::http_client_config ClientConfig(absl::Duration timeout) const {
    client::http_client_config cfg;
    cfg.set_timeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
    cfg.set_validate_certificates(!config.insecure_skip_tls_verify);
    std::string ca = config.ca_pem;
    std::string cert = config.client_cert_pem;
    std::string key = config.client_key_pem;
    if (!ca.empty() || !cert.empty()) {
      cfg.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& ctx) {
        boost::system::error_code ec;
        if (!ca.empty()) {
          // Only the kubeconfig's CA is trusted, as client-go does when one
          // is given. The fresh store also frees the system roots cpprest
          // loaded into this connection's context (set_default_verify_paths:
          // ~140 certificates per connection, which were 34 of the
          // operator's 61 MiB peak heap with ~100 connections open).
          SSL_CTX_set_cert_store(ctx.native_handle(), X509_STORE_new());
          ctx.add_certificate_authority(boost::asio::buffer(ca), ec);
        }
        if (!cert.empty()) {
          ctx.use_certificate_chain(boost::asio::buffer(cert), ec);
          ctx.use_private_key(boost::asio::buffer(key), boost::asio::ssl::context::pem, ec);
        }
      });
    }
    return cfg;
  }

  absl::StatusOr<http::http_request> Build(const HttpRequest& request) {
    // web::uri throws on a malformed target; no exception leaves the transport.
    if (!web::uri::validate(request.target)) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a valid request target: \"", request.target, "\""));
    }
    http::http_request req(http::method(request.method));
    req.set_request_uri(web::uri(request.target));
    req.headers().add("Accept", "application/json");
    req.headers().add("User-Agent", options.user_agent);
    absl::StatusOr<std::string> token = tokens.Token();
    if (!token.ok()) return token.status();
    if (!token->empty()) req.headers().add("Authorization", absl::StrCat("Bearer ", *token));
    if (!request.content_type.empty() || !request.body.empty()) {
      req.set_body(request.body, request.content_type.empty() ? std::string("application/json")
                                                              : request.content_type);
    }
    return req;
  }
};

namespace {

class CpprestStream final : public HttpStream {
 public:
  CpprestStream(std::unique_ptr<client::http_client> client, http::http_response response,
                pplx::cancellation_token_source cts)
      : client_(std::move(client)), response_(std::move(response)), cts_(cts) {}

  ~CpprestStream() override { Cancel(); }

  absl::StatusOr<bool> ReadLine(std::string* line) override {
    while (true) {
      size_t newline = buffer_.find('\n', scanned_);
      if (newline != std::string::npos) {
        line->assign(buffer_, 0, newline);
        buffer_.erase(0, newline + 1);
        scanned_ = 0;
        return true;
      }
      scanned_ = buffer_.size();
      if (eof_) {
        if (buffer_.empty()) return false;
        line->swap(buffer_);
        buffer_.clear();
        scanned_ = 0;
        return true;
      }
      if (cts_.get_token().is_canceled()) return absl::CancelledError("watch cancelled");
      char chunk[16384];
      size_t n = 0;
      try {
        // getn() waits for the whole count; wait for one byte instead, then
        // take whatever else has already arrived.
        auto buf = response_.body().streambuf();
        size_t avail = buf.in_avail();
        if (avail == 0) {
          auto c = buf.bumpc().get();  // getc() would only peek
          if (c == decltype(buf)::traits::eof()) {
            eof_ = true;
            continue;
          }
          buffer_.push_back(static_cast<char>(c));
          avail = buf.in_avail();
        }
        if (avail > 0) {
          n = buf.getn(reinterpret_cast<uint8_t*>(chunk), std::min(avail, sizeof chunk)).get();
        }
      } catch (const std::exception& e) {
        if (cts_.get_token().is_canceled()) return absl::CancelledError("watch cancelled");
        return absl::UnavailableError(absl::StrCat("stream broken: ", e.what()));
      }
      buffer_.append(chunk, n);
    }
  }

  void Cancel() override {
    std::call_once(cancelled_, [this] { cts_.cancel(); });
  }

 private:
  std::unique_ptr<client::http_client> client_;
  http::http_response response_;
  pplx::cancellation_token_source cts_;
  std::once_flag cancelled_;
  std::string buffer_;
  size_t scanned_ = 0;
  bool eof_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CpprestTransport>> CpprestTransport::Create(
    const KubeConfig& config, const TransportOptions& options, const ConfigEnvironment& env,
    const Clock& clock) {
  if (!absl::StartsWith(config.server, "https://") && !absl::StartsWith(config.server, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.source, ": server \"", config.server, "\" is not an http(s) URL"));
  }
  if (!config.ca_pem.empty() && CountCertificates(config.ca_pem) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.source, ": the certificate authority holds no PEM certificate"));
  }
  if (!config.client_cert_pem.empty() && CountCertificates(config.client_cert_pem) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.source, ": the client certificate is not a PEM certificate"));
  }
  if (!config.client_key_pem.empty() && !IsPrivateKey(config.client_key_pem)) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.source, ": the client key is not a PEM private key"));
  }
  if (!config.client_cert_pem.empty() && !config.client_key_pem.empty() &&
      !KeyMatchesCertificate(config.client_cert_pem, config.client_key_pem)) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.source, ": the client key does not belong to the client certificate"));
  }
  auto impl = std::make_unique<Impl>(config, options, env, clock);
  try {
    impl->client = std::make_unique<client::http_client>(
        web::uri(config.server), impl->ClientConfig(options.request_timeout));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.source, ": server \"", config.server, "\": ", e.what()));
  }
  return std::unique_ptr<CpprestTransport>(new CpprestTransport(std::move(impl)));
}

CpprestTransport::CpprestTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpprestTransport::~CpprestTransport() = default;

std::string CpprestTransport::Server() const { return impl_->config.server; }

absl::StatusOr<HttpResponse> CpprestTransport::Send(const HttpRequest& request) {
  absl::StatusOr<http::http_request> req = impl_->Build(request);
  if (!req.ok()) return req.status();
  try {
    http::http_response response = impl_->client->request(*req).get();
    HttpResponse out;
    out.status = response.status_code();
    auto it = response.headers().find("Retry-After");
    if (it != response.headers().end()) out.retry_after = it->second;
    out.body = response.extract_utf8string(/*ignore_content_type=*/true).get();
    if (out.status == 401) impl_->tokens.Invalidate();
    return out;
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(What(request), " to ", impl_->config.server, ": ", Explain(e.what())));
  }
}

absl::StatusOr<StreamResponse> CpprestTransport::OpenStream(const HttpRequest& request,
                                                            absl::Duration idle_timeout) {
  absl::StatusOr<http::http_request> req = impl_->Build(request);
  if (!req.ok()) return req.status();
  try {
    // A client of its own: the idle timeout differs from plain requests and
    // the connection stays with the stream until it ends.
    auto stream_client = std::make_unique<client::http_client>(web::uri(impl_->config.server),
                                                               impl_->ClientConfig(idle_timeout));
    pplx::cancellation_token_source cts;
    http::http_response response = stream_client->request(*req, cts.get_token()).get();
    StreamResponse out;
    out.status = response.status_code();
    if (out.status >= 200 && out.status < 300) {
      out.stream = std::make_unique<CpprestStream>(std::move(stream_client), response, cts);
      return out;
    }
    out.error.status = out.status;
    auto it = response.headers().find("Retry-After");
    if (it != response.headers().end()) out.error.retry_after = it->second;
    out.error.body = response.extract_utf8string(true).get();
    if (out.status == 401) impl_->tokens.Invalidate();
    return out;
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(What(request), " to ", impl_->config.server, ": ", Explain(e.what())));
  }
}

}  // namespace kubetrain::kube
