#include "testing/kube_emulator_table.h"

#include <gtest/gtest.h>

namespace kubetrain::testing {
namespace {

TEST(KubeEmulatorTableTest, JsonPathsOfPrinterColumns) {
  const OrderedJson obj = OrderedJson::parse(
      R"({"status":{"progress":{"step":7},"conditions":[{"type":"Created"},{"type":"Running"}]}})");
  EXPECT_EQ(JsonPathValue(obj, ".status.progress.step"), 7);
  EXPECT_EQ(JsonPathValue(obj, ".status.conditions[-1:].type"), "Running");
  EXPECT_EQ(JsonPathValue(obj, ".status.conditions[0].type"), "Created");
  EXPECT_TRUE(JsonPathValue(obj, ".status.conditions[5].type").is_null());
  EXPECT_TRUE(JsonPathValue(obj, ".status.progress.loss").is_null());
  EXPECT_TRUE(JsonPathValue(obj, "status").is_null());
}

TEST(KubeEmulatorTableTest, AgesAsKubectlPrintsThem) {
  EXPECT_EQ(HumanDuration(absl::Seconds(0)), "0s");
  EXPECT_EQ(HumanDuration(absl::Seconds(119)), "119s");
  EXPECT_EQ(HumanDuration(absl::Seconds(150)), "2m30s");
  EXPECT_EQ(HumanDuration(absl::Minutes(5)), "5m");
  EXPECT_EQ(HumanDuration(absl::Minutes(90)), "90m");
  EXPECT_EQ(HumanDuration(absl::Hours(4) + absl::Minutes(5)), "4h5m");
  EXPECT_EQ(HumanDuration(absl::Hours(30)), "30h");
  EXPECT_EQ(HumanDuration(absl::Hours(24 * 3 + 2)), "3d2h");
  EXPECT_EQ(HumanDuration(absl::Hours(24 * 30)), "30d");
  EXPECT_EQ(HumanDuration(absl::Seconds(-5)), "<invalid>");
}

TEST(KubeEmulatorTableTest, WantsOnlyAMetaV1Table) {
  EXPECT_TRUE(WantsTable(
      "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta."
      "k8s.io,application/json"));
  EXPECT_FALSE(WantsTable("application/json"));
  EXPECT_FALSE(WantsTable("application/json;as=Table;v=v1beta1;g=meta.k8s.io"));
}

TEST(KubeEmulatorTableTest, APodsStatusColumnAsKubectlShowsIt) {
  const ResourceType& pods = ServedResources()[0];
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  const OrderedJson list =
      OrderedJson::parse(R"({"kind":"PodList","metadata":{"resourceVersion":"9"},
    "items":[{"metadata":{"name":"done","creationTimestamp":"2023-11-14T22:11:40Z"},
              "spec":{"nodeName":"n1","containers":[{"name":"c"}]},
              "status":{"phase":"Succeeded","podIP":"10.0.0.2","containerStatuses":[
                {"name":"c","ready":false,"restartCount":2,
                 "state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}},
             {"metadata":{"name":"up","deletionTimestamp":"2023-11-14T22:13:00Z"},
              "spec":{"containers":[{"name":"c"}]},
              "status":{"phase":"Running","containerStatuses":[
                {"name":"c","ready":true,"restartCount":0,"state":{"running":{}}}]}}]})");
  const OrderedJson table = ToTable(pods, list, {}, now);
  EXPECT_EQ(table["metadata"]["resourceVersion"], "9");
  ASSERT_EQ(table["rows"].size(), 2u);
  EXPECT_EQ(table["rows"][0]["cells"],
            OrderedJson::parse(
                R"(["done","0/1","Completed",2,"100s","10.0.0.2","n1","<none>","<none>"])"));
  EXPECT_EQ(table["rows"][1]["cells"][1], "1/1");
  EXPECT_EQ(table["rows"][1]["cells"][2], "Terminating");
  EXPECT_TRUE(table["rows"][1]["cells"][4].is_null());  // no creationTimestamp
}

}  // namespace
}  // namespace kubetrain::testing
