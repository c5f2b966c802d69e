#include "operator/kube/serving_cert.h"

#include <arpa/inet.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "operator/kube/openssl_ptr.h"

namespace kubetrain::kube {
namespace {

// Owners of OpenSSL objects, so every error path frees what it made.
using BioPtr = OpensslPtr<BIO, BIO_free>;
using PkeyPtr = OpensslPtr<EVP_PKEY, EVP_PKEY_free>;
using X509Ptr = OpensslPtr<X509, X509_free>;
using ExtensionPtr = OpensslPtr<X509_EXTENSION, X509_EXTENSION_free>;
using BignumPtr = OpensslPtr<BIGNUM, BN_free>;
using GeneralNamePtr = OpensslPtr<GENERAL_NAME, GENERAL_NAME_free>;
using GeneralNamesPtr = OpensslPtr<GENERAL_NAMES, GENERAL_NAMES_free>;
using Asn1StringPtr = OpensslPtr<ASN1_STRING, ASN1_STRING_free>;

// X.509's upper bound on a common name (ub-common-name).
constexpr size_t kMaxCommonName = 64;
constexpr int kSerialBytes = 16;

// `what`, then every error on this thread's OpenSSL error queue, emptying it.
std::string OpenSslError(absl::string_view what) {
  std::vector<std::string> errors;
  while (unsigned long code = ERR_get_error()) {  // NOLINT(runtime/int): OpenSSL's type
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    errors.emplace_back(text);
  }
  if (errors.empty()) return std::string(what);
  return absl::StrCat(what, ": ", absl::StrJoin(errors, "; "));
}

absl::Status Internal(absl::string_view what) { return absl::InternalError(OpenSslError(what)); }

// The 4 or 16 bytes of an IPv4 or IPv6 address in text, as they go in a
// subjectAltName; "" when `text` is not an address. Strict:
// inet_pton takes no surrounding spaces, leading zeros or trailing text.
std::string IpBytes(const std::string& text) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, text.c_str(), buf) == 1) return std::string(buf, buf + 4);
  if (inet_pton(AF_INET6, text.c_str(), buf) == 1) return std::string(buf, buf + 16);
  return "";
}

// An IPv4-mapped IPv6 address compares equal to the IPv4 address.
std::string CanonicalIp(std::string bytes) {
  static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (bytes.size() == 16 && std::memcmp(bytes.data(), kMapped, sizeof kMapped) == 0) {
    return bytes.substr(12);
  }
  return bytes;
}

// A DNS name as a subjectAltName may carry: letters, digits, '-', '.', '_'
// and a wildcard '*'. Anything else (spaces, commas, non-ASCII) is a typo
// that would give a certificate no client matches.
bool ValidDnsName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_' &&
        c != '*') {
      return false;
    }
  }
  return true;
}

// UTC as Kubernetes writes times: "2026-06-01T12:00:00Z".
std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

absl::Status ValidateRequest(const ServingCertRequest& request, absl::Time now) {
  if (request.dns_names.empty() && request.ip_addresses.empty()) {
    return absl::InvalidArgumentError(
        "a serving certificate needs at least one DNS name or IP address (clients match "
        "subjectAltNames, not the common name)");
  }
  for (const std::string& name : request.dns_names) {
    if (!ValidDnsName(name)) {
      return absl::InvalidArgumentError(absl::StrCat("not a DNS name: \"", name, "\""));
    }
  }
  for (const std::string& ip : request.ip_addresses) {
    if (IpBytes(ip).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("not an IP address: \"", ip, "\""));
    }
  }
  if (request.common_name.size() > kMaxCommonName) {
    return absl::InvalidArgumentError(absl::StrCat("common name \"", request.common_name,
                                                   "\" is longer than ", kMaxCommonName,
                                                   " characters"));
  }
  if (request.validity <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("validity must be positive, not ", absl::FormatDuration(request.validity)));
  }
  // X.509 times end at 9999-12-31 (and an infinite duration is a bug).
  const absl::Time last =
      absl::FromCivil(absl::CivilSecond(9999, 12, 31, 23, 59, 59), absl::UTCTimeZone());
  if (now == absl::InfinitePast() || now + request.validity > last) {
    return absl::InvalidArgumentError(
        absl::StrCat("validity ", absl::FormatDuration(request.validity), " from ", Rfc3339(now),
                     " ends after 9999-12-31, the latest time a certificate can hold"));
  }
  return absl::OkStatus();
}

// Subject name: the requested common name, else the first DNS name or IP
// address that fits, else a fixed one (a CA certificate's subject must not
// be empty).
std::string CommonName(const ServingCertRequest& request) {
  if (!request.common_name.empty()) return request.common_name;
  for (const std::vector<std::string>* names : {&request.dns_names, &request.ip_addresses}) {
    for (const std::string& name : *names) {
      if (name.size() <= kMaxCommonName) return name;
    }
  }
  return "kubetrain-serving-cert";
}

// The subjectAltName extension, built as GENERAL_NAMES rather than parsed
// from "DNS:a,IP:b" text so that no character in a name can be read as
// syntax.
absl::Status AddSubjectAltNames(X509* cert, const ServingCertRequest& request) {
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names) return Internal("allocating subjectAltNames");
  auto push = [&](int type, Asn1StringPtr value) -> absl::Status {
    GeneralNamePtr name(GENERAL_NAME_new());
    if (!name) return Internal("allocating a subjectAltName");
    GENERAL_NAME_set0_value(name.get(), type, value.release());
    if (sk_GENERAL_NAME_push(names.get(), name.get()) == 0) {
      return Internal("adding a subjectAltName");
    }
    name.release();  // owned by `names` now
    return absl::OkStatus();
  };
  for (const std::string& dns : request.dns_names) {
    Asn1StringPtr value(ASN1_IA5STRING_new());
    if (!value || ASN1_STRING_set(value.get(), dns.data(), static_cast<int>(dns.size())) != 1) {
      return Internal("encoding a DNS name");
    }
    absl::Status pushed = push(GEN_DNS, std::move(value));
    if (!pushed.ok()) return pushed;
  }
  for (const std::string& ip : request.ip_addresses) {
    const std::string bytes = IpBytes(ip);  // validated already
    Asn1StringPtr value(ASN1_OCTET_STRING_new());
    if (!value ||
        ASN1_OCTET_STRING_set(value.get(), reinterpret_cast<const unsigned char*>(bytes.data()),
                              static_cast<int>(bytes.size())) != 1) {
      return Internal("encoding an IP address");
    }
    absl::Status pushed = push(GEN_IPADD, std::move(value));
    if (!pushed.ok()) return pushed;
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), /*crit=*/0, X509V3_ADD_DEFAULT) !=
      1) {
    return Internal("adding subjectAltName");
  }
  return absl::OkStatus();
}

// One extension from OpenSSL's configuration syntax (fixed strings only).
absl::Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const char* value) {
  ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, ctx, nid, value));
  if (!ext) return Internal(absl::StrCat("making ", OBJ_nid2sn(nid), " \"", value, "\""));
  if (X509_add_ext(cert, ext.get(), -1) != 1) {
    return Internal(absl::StrCat("adding ", OBJ_nid2sn(nid)));
  }
  return absl::OkStatus();
}

absl::Status SetRandomSerial(X509* cert) {
  unsigned char bytes[kSerialBytes];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return Internal("RAND_bytes");
  BignumPtr serial(BN_bin2bn(bytes, sizeof bytes, nullptr));
  if (!serial) return Internal("BN_bin2bn");
  // A serial number is a positive integer: never zero.
  if (BN_is_zero(serial.get()) && BN_one(serial.get()) != 1) return Internal("BN_one");
  if (BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert)) == nullptr) {
    return Internal("setting the serial number");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> BioText(BIO* bio) {
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int): OpenSSL's type
  if (size < 0 || (size > 0 && data == nullptr)) return Internal("reading a memory BIO");
  return std::string(data, static_cast<size_t>(size));
}

absl::StatusOr<X509Ptr> ParseCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return Internal("BIO_new_mem_buf");
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return absl::InvalidArgumentError(OpenSslError("cert_pem is not a PEM certificate"));
  return cert;
}

absl::StatusOr<PkeyPtr> ParseKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return Internal("BIO_new_mem_buf");
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return absl::InvalidArgumentError(OpenSslError("key_pem is not a PEM private key"));
  return key;
}

absl::StatusOr<absl::Time> ToTime(const ASN1_TIME* time, absl::string_view what) {
  struct tm tm;
  std::memset(&tm, 0, sizeof tm);
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) {
    return absl::InvalidArgumentError(OpenSslError(absl::StrCat("certificate's ", what)));
  }
  return absl::FromTM(tm, absl::UTCTimeZone());
}

}  // namespace

absl::StatusOr<ServingCert> GenerateServingCert(const ServingCertRequest& request, absl::Time now) {
  absl::Status valid = ValidateRequest(request, now);
  if (!valid.ok()) return valid;
  ERR_clear_error();

  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return Internal("generating a P-256 key");

  X509Ptr cert(X509_new());
  if (!cert) return Internal("X509_new");
  if (X509_set_version(cert.get(), X509_VERSION_3) != 1) return Internal("X509_set_version");
  absl::Status serial = SetRandomSerial(cert.get());
  if (!serial.ok()) return serial;
  if (ASN1_TIME_set(X509_getm_notBefore(cert.get()), absl::ToTimeT(now - absl::Hours(1))) ==
          nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), absl::ToTimeT(now + request.validity)) ==
          nullptr) {
    return Internal("setting the validity period");
  }
  if (X509_set_pubkey(cert.get(), key.get()) != 1) return Internal("X509_set_pubkey");

  const std::string common_name = CommonName(request);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.data()),
                                 static_cast<int>(common_name.size()), -1, 0) != 1) {
    return Internal(absl::StrCat("setting the common name \"", common_name, "\""));
  }
  if (X509_set_issuer_name(cert.get(), subject) != 1) return Internal("X509_set_issuer_name");

  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  // The subject key id before the authority key id, which refers to it.
  static constexpr std::pair<int, const char*> kExtensions[] = {
      {NID_basic_constraints, "critical,CA:TRUE"},
      {NID_key_usage, "critical,digitalSignature,keyEncipherment,keyCertSign"},
      {NID_ext_key_usage, "serverAuth"},
      {NID_subject_key_identifier, "hash"},
      {NID_authority_key_identifier, "keyid:always"},
  };
  for (const auto& [nid, value] : kExtensions) {
    absl::Status added = AddExtension(cert.get(), &ctx, nid, value);
    if (!added.ok()) return added;
  }
  absl::Status sans = AddSubjectAltNames(cert.get(), request);
  if (!sans.ok()) return sans;

  if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) return Internal("X509_sign");

  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  if (!cert_bio || PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1) {
    return Internal("writing the certificate PEM");
  }
  // PKCS#8 ("BEGIN PRIVATE KEY"), unencrypted.
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  if (!key_bio || PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr,
                                           nullptr) != 1) {
    return Internal("writing the private key PEM");
  }
  absl::StatusOr<std::string> cert_pem = BioText(cert_bio.get());
  if (!cert_pem.ok()) return cert_pem.status();
  absl::StatusOr<std::string> key_pem = BioText(key_bio.get());
  if (!key_pem.ok()) return key_pem.status();
  return ServingCert{*std::move(cert_pem), *std::move(key_pem)};
}

absl::Status CheckServingCert(const ServingCert& cert, const ServingCertRequest& request,
                              absl::Time now, absl::Duration min_remaining) {
  for (const std::string& ip : request.ip_addresses) {
    if (IpBytes(ip).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("not an IP address: \"", ip, "\""));
    }
  }
  ERR_clear_error();
  absl::StatusOr<X509Ptr> x509 = ParseCert(cert.cert_pem);
  if (!x509.ok()) return x509.status();
  absl::StatusOr<PkeyPtr> key = ParseKey(cert.key_pem);
  if (!key.ok()) return key.status();
  absl::StatusOr<absl::Time> not_before = ToTime(X509_get0_notBefore(x509->get()), "notBefore");
  if (!not_before.ok()) return not_before.status();
  absl::StatusOr<absl::Time> not_after = ToTime(X509_get0_notAfter(x509->get()), "notAfter");
  if (!not_after.ok()) return not_after.status();

  // What the certificate names.
  std::vector<std::string> dns_names;
  std::vector<std::string> ips;  // canonical bytes
  GeneralNamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(x509->get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    int type = 0;
    const auto* value = static_cast<const ASN1_STRING*>(GENERAL_NAME_get0_value(name, &type));
    if (value == nullptr) continue;
    std::string text(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                     static_cast<size_t>(ASN1_STRING_length(value)));
    if (type == GEN_DNS) dns_names.push_back(std::move(text));
    if (type == GEN_IPADD) ips.push_back(CanonicalIp(std::move(text)));
  }

  std::vector<std::string> problems;
  // X509_check_private_key compares the public halves and queues an error
  // when they differ.
  if (X509_check_private_key(x509->get(), key->get()) != 1) {
    ERR_clear_error();
    problems.push_back("key does not match the certificate");
  }
  if (*not_before > now) {
    problems.push_back(
        absl::StrCat("not valid before ", Rfc3339(*not_before), " (now ", Rfc3339(now), ")"));
  }
  if (*not_after < now + min_remaining) {
    problems.push_back(absl::StrCat("expires at ", Rfc3339(*not_after), ", less than ",
                                    absl::FormatDuration(min_remaining), " after ", Rfc3339(now)));
  }
  for (const std::string& wanted : request.dns_names) {
    bool found = false;
    for (const std::string& have : dns_names) found = found || absl::EqualsIgnoreCase(have, wanted);
    if (!found) problems.push_back(absl::StrCat("no subjectAltName DNS:", wanted));
  }
  for (const std::string& wanted : request.ip_addresses) {
    const std::string bytes = CanonicalIp(IpBytes(wanted));  // validated above
    bool found = false;
    for (const std::string& have : ips) found = found || have == bytes;
    if (!found) problems.push_back(absl::StrCat("no subjectAltName IP:", wanted));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("serving certificate: ", absl::StrJoin(problems, "; ")));
}

}  // namespace kubetrain::kube
