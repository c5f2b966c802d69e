#include "tools/node_agent/container_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace kubetrain::node_agent {
namespace {

using Json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::Pair;

const Json kPod = Json::parse(R"json({
  "metadata": {"name": "job-worker-0", "namespace": "team", "uid": "u-1",
               "labels": {"kubetrain.io/replica-index": "0"},
               "annotations": {"a": "b"}},
  "spec": {"serviceAccountName": "sa", "containers": []}})json");

KeyLookup Keys(std::map<std::string, std::string> values) {
  return [values](const std::string& kind, const std::string& ns, const std::string& name,
                  const std::string& key) -> absl::StatusOr<std::string> {
    auto it = values.find(kind + "/" + ns + "/" + name + "/" + key);
    if (it == values.end()) return absl::NotFoundError("not found");
    return it->second;
  };
}

TEST(ContainerEnvTest, ValuesSecretsFieldRefsAndExpansionInOrder) {
  const Json container = Json::parse(R"json({"name": "c", "env": [
    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "job-token", "key": "token"}}},
    {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    {"name": "IDX", "valueFrom": {"fieldRef":
        {"fieldPath": "metadata.labels['kubetrain.io/replica-index']"}}},
    {"name": "ADDR", "value": "$(POD).$(NS):2222 $(LATER) $$(POD)"},
    {"name": "LATER", "value": "x"}]})json");
  absl::StatusOr<api::EnvList> env = ContainerEnvironment(
      kPod, container, {"10.244.0.7", "127.0.0.1", "node-a"},
      Keys({{"Secret/team/job-token/token", "s3cret"}, {"ConfigMap/team/cfg/mode", "sync"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_THAT(
      *env, ElementsAre(Pair("TOKEN", "s3cret"), Pair("MODE", "sync"), Pair("POD", "job-worker-0"),
                        Pair("NS", "team"), Pair("IP", "10.244.0.7"), Pair("NODE", "node-a"),
                        Pair("IDX", "0"), Pair("ADDR", "job-worker-0.team:2222 $(LATER) $(POD)"),
                        Pair("LATER", "x")));
}

TEST(ContainerEnvTest, MissingSecretIsAnErrorUnlessOptional) {
  Json container = Json::parse(R"json({"name": "c", "env": [
    {"name": "T", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "token"}}}]})json");
  absl::StatusOr<api::EnvList> env = ContainerEnvironment(kPod, container, {}, Keys({}));
  ASSERT_FALSE(env.ok());
  EXPECT_TRUE(absl::IsNotFound(env.status()));
  EXPECT_NE(env.status().message().find("container c env T: Secret gone key token"),
            std::string::npos)
      << env.status();
  container["env"][0]["valueFrom"]["secretKeyRef"]["optional"] = true;
  env = ContainerEnvironment(kPod, container, {}, Keys({}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_TRUE(env->empty());
}

TEST(ContainerEnvTest, UnsupportedSourcesAreErrorsNotSilence) {
  Json resource = Json::parse(R"json({"name": "c", "env": [
    {"name": "M", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}}]})json");
  EXPECT_FALSE(ContainerEnvironment(kPod, resource, {}, Keys({})).ok());
  Json field = Json::parse(R"json({"name": "c", "env": [
    {"name": "M", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}]})json");
  absl::StatusOr<api::EnvList> env = ContainerEnvironment(kPod, field, {}, Keys({}));
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("spec.bogus"), std::string::npos);
  Json env_from =
      Json::parse(R"json({"name": "c", "envFrom": [{"secretRef": {"name": "s"}}]})json");
  EXPECT_FALSE(ContainerEnvironment(kPod, env_from, {}, Keys({})).ok());
}

TEST(ContainerEnvTest, ArgvExpandsAndUsesTheEntrypointWithoutCommand) {
  const api::EnvList env = {{"EPOCHS", "3"}};
  Json container =
      Json::parse(R"json({"name": "c", "args": ["train", "--epochs", "$(EPOCHS)"]})json");
  EXPECT_THAT(*ContainerArgv(container, env, "/bin/kubetrain"),
              ElementsAre("/bin/kubetrain", "train", "--epochs", "3"));
  container["command"] = {"/bin/sh", "-c"};
  container["args"] = {"echo $(EPOCHS)"};
  EXPECT_THAT(*ContainerArgv(container, env, "/bin/kubetrain"),
              ElementsAre("/bin/sh", "-c", "echo 3"));
  EXPECT_FALSE(ContainerArgv(Json::parse(R"json({"name": "c"})json"), env, "").ok());
}

}  // namespace
}  // namespace kubetrain::node_agent
