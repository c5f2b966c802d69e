#include "operator/kube/kube_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "operator/kube/token_source.h"

namespace kubetrain::kube {
namespace {

using ::testing::HasSubstr;

class FakeEnv : public ConfigEnvironment {
 public:
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;
  std::optional<std::string> GetEnv(absl::string_view name) const override {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  }
  absl::StatusOr<std::string> ReadFile(absl::string_view path) const override {
    auto it = files.find(std::string(path));
    if (it == files.end()) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    return it->second;
  }
  bool FileExists(absl::string_view path) const override {
    return files.count(std::string(path)) > 0;
  }
};

constexpr char kCa[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string KubeConfigText() {
  return absl::StrCat(R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: )",
                      absl::Base64Escape(kCa), R"(
- name: prod-cluster
  cluster:
    server: https://prod.example:443
    certificate-authority: certs/ca.crt
    insecure-skip-tls-verify: false
- name: lab-cluster
  cluster:
    server: https://lab.example
    insecure-skip-tls-verify: true
contexts:
- name: dev
  context: {cluster: dev-cluster, user: dev-user, namespace: team-a}
- name: prod
  context: {cluster: prod-cluster, user: cert-user}
- name: lab
  context: {cluster: lab-cluster, user: file-user}
users:
- name: dev-user
  user: {token: abc123}
- name: cert-user
  user:
    client-certificate: certs/client.crt
    client-key-data: )",
                      absl::Base64Escape("KEY"), R"(
- name: file-user
  user: {tokenFile: /var/tokens/t}
)");
}

TEST(KubeConfigTest, CurrentContextTokenAndCaData) {
  FakeEnv env;
  absl::StatusOr<KubeConfig> c = ParseKubeConfig(KubeConfigText(), "kc", "", "/home/u/.kube", env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(c->token, "abc123");
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->default_namespace, "team-a");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_THAT(c->source, HasSubstr("context dev"));
}

TEST(KubeConfigTest, NamedContextResolvesRelativeFiles) {
  FakeEnv env;
  env.files["/home/u/.kube/certs/ca.crt"] = "CA-PEM";
  env.files["/home/u/.kube/certs/client.crt"] = "CERT-PEM";
  absl::StatusOr<KubeConfig> c =
      ParseKubeConfig(KubeConfigText(), "kc", "prod", "/home/u/.kube", env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://prod.example:443");
  EXPECT_EQ(c->ca_pem, "CA-PEM");
  EXPECT_EQ(c->client_cert_pem, "CERT-PEM");
  EXPECT_EQ(c->client_key_pem, "KEY");
  EXPECT_EQ(c->default_namespace, "default");
}

TEST(KubeConfigTest, InsecureAndTokenFile) {
  FakeEnv env;
  absl::StatusOr<KubeConfig> c = ParseKubeConfig(KubeConfigText(), "kc", "lab", "/x", env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->token_file, "/var/tokens/t");
  EXPECT_TRUE(c->token.empty());
}

TEST(KubeConfigTest, MalformedInputsGiveClearErrors) {
  FakeEnv env;
  struct Case {
    std::string text;
    std::string context;
    std::string message;
  };
  std::vector<Case> cases = {
      {"clusters: [\n  - name: a\n", "", "kc:"},  // malformed YAML names the source
      {"- just\n- a list\n", "", "must be a mapping"},
      {"apiVersion: v1\n", "", "no current-context"},
      {KubeConfigText(), "missing", "context \"missing\" not found"},
      // Entries whose names are not strings are skipped, never thrown on.
      {"current-context: c\ncontexts: [{name: ~}, {name: 5}, {name: [c]}, 7]\n", "",
       "context \"c\" not found"},
      {"current-context: c\ncontexts: [{name: c, context: {cluster: x}}]\nclusters: []\n", "",
       "cluster \"x\" not found"},
      {"current-context: c\ncontexts: [{name: c, context: {user: u}}]\n", "", "names no cluster"},
      {"current-context: c\ncontexts: [{name: c, context: {cluster: x}}]\n"
       "clusters: [{name: x, cluster: {}}]\n",
       "", "has no server"},
      {"current-context: c\ncontexts: [{name: c, context: {cluster: x}}]\n"
       "clusters: [{name: x, cluster: {server: 'ftp://h'}}]\n",
       "", "not an http(s) URL"},
      {"current-context: c\ncontexts: [{name: c, context: {cluster: x}}]\n"
       "clusters: [{name: x, cluster: {server: 'https://h', certificate-authority-data: '!!!'}}]\n",
       "", "not valid base64"},
      {"current-context: c\ncontexts: [{name: c, context: {cluster: x}}]\n"
       "clusters: [{name: x, cluster: {server: 'https://h', certificate-authority: /no/ca}}]\n",
       "", "certificate-authority: cannot read /no/ca"},
      {"current-context: c\ncontexts: [{name: c, context: {cluster: x, user: u}}]\n"
       "clusters: [{name: x, cluster: {server: 'https://h'}}]\n"
       "users: [{name: u, user: {exec: {command: aws}}}]\n",
       "", "exec and auth-provider credentials are not supported"},
      {"current-context: c\ncontexts: [{name: c, context: {cluster: x, user: u}}]\n"
       "clusters: [{name: x, cluster: {server: 'https://h'}}]\n"
       "users: [{name: u, user: {client-certificate-data: Q0VSVA==}}]\n",
       "", "needs both certificate and key"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<KubeConfig> config = ParseKubeConfig(c.text, "kc", c.context, "/d", env);
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(c.message)) << c.text;
  }
}

TEST(KubeConfigTest, InCluster) {
  FakeEnv env;
  env.env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1";
  env.env["KUBERNETES_SERVICE_PORT"] = "443";
  env.files["/sa/token"] = "tok\n";
  env.files["/sa/ca.crt"] = "CA";
  env.files["/sa/namespace"] = "ops\n";
  absl::StatusOr<KubeConfig> c = LoadInClusterConfig(env, "/sa");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token_file, "/sa/token");
  EXPECT_EQ(c->ca_pem, "CA");
  EXPECT_EQ(c->default_namespace, "ops");
  EXPECT_EQ(c->source, "in-cluster");

  env.env["KUBERNETES_SERVICE_HOST"] = "fd00::1";
  c = LoadInClusterConfig(env, "/sa");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->server, "https://[fd00::1]:443");

  env.files.erase("/sa/token");
  c = LoadInClusterConfig(env, "/sa");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("service-account token"));

  FakeEnv outside;
  c = LoadInClusterConfig(outside, "/sa");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("KUBERNETES_SERVICE_HOST"));
}

TEST(KubeConfigTest, ResolveFollowsKubectlOrder) {
  FakeEnv env;
  std::string text = KubeConfigText();
  env.files["/explicit"] = text;
  env.files["/second"] = text;
  env.files["/home/u/.kube/config"] = text;
  env.env["HOME"] = "/home/u";
  env.env["KUBECONFIG"] = "/missing:/second";
  env.env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1";
  env.env["KUBERNETES_SERVICE_PORT"] = "443";

  absl::StatusOr<KubeConfig> c = ResolveKubeConfig("/explicit", "", env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->source, HasSubstr("/explicit"));

  c = ResolveKubeConfig("", "", env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->source, HasSubstr("/second"));

  env.env.erase("KUBECONFIG");
  c = ResolveKubeConfig("", "", env);  // in-cluster, but its files are missing
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("in-cluster"));

  env.env.erase("KUBERNETES_SERVICE_HOST");
  c = ResolveKubeConfig("", "", env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->source, HasSubstr("/home/u/.kube/config"));

  env.files.erase("/home/u/.kube/config");
  c = ResolveKubeConfig("", "", env);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("--kubeconfig"));

  c = ResolveKubeConfig("/nope", "", env);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("kubeconfig /nope"));
}

TEST(BearerTokenSourceTest, RereadsRotatedTokenFile) {
  FakeEnv env;
  FakeClock clock;
  env.files["/t"] = "first\n";
  BearerTokenSource tokens("", "/t", env, clock, absl::Seconds(60));
  EXPECT_EQ(*tokens.Token(), "first");
  env.files["/t"] = "second";
  EXPECT_EQ(*tokens.Token(), "first");  // cached within the refresh interval
  clock.AdvanceSeconds(61);
  EXPECT_EQ(*tokens.Token(), "second");
  env.files["/t"] = "third";
  tokens.Invalidate();  // after a 401
  EXPECT_EQ(*tokens.Token(), "third");
  env.files.erase("/t");  // mid-rotation: keep the last good token
  clock.AdvanceSeconds(61);
  EXPECT_EQ(*tokens.Token(), "third");

  BearerTokenSource missing("", "/none", env, clock);
  EXPECT_FALSE(missing.Token().ok());
  BearerTokenSource fixed("static", "", env, clock);
  EXPECT_EQ(*fixed.Token(), "static");
}

}  // namespace
}  // namespace kubetrain::kube
