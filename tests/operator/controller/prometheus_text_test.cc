// ParsePrometheusText: the text exposition format as the runtime and
// prometheus-cpp write it, its corner cases, and malformed lines.
#include "operator/controller/prometheus_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace kubetrain::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(PrometheusTextTest, ParsesHelpTypeAndLabelledSamples) {
  absl::StatusOr<PrometheusExposition> page = ParsePrometheusText(
      "# HELP kubetrain_global_step Step this replica has reached.\n"
      "# TYPE kubetrain_global_step gauge\n"
      "kubetrain_global_step{job=\"fmnist\",namespace=\"ns\",replica_type=\"worker\","
      "replica_index=\"0\"} 1200\n"
      "# TYPE kubetrain_step_duration_seconds histogram\n"
      "kubetrain_step_duration_seconds_bucket{le=\"0.005\"} 3\n"
      "kubetrain_step_duration_seconds_bucket{le=\"+Inf\"} 7\n"
      "kubetrain_step_duration_seconds_sum 0.25\n"
      "kubetrain_step_duration_seconds_count 7\n");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->samples.size(), 5u);
  const PrometheusSample& step = page->samples[0];
  EXPECT_EQ(step.name, "kubetrain_global_step");
  EXPECT_EQ(step.value, 1200);
  EXPECT_FALSE(step.timestamp_ms.has_value());
  EXPECT_THAT(step.labels, ElementsAre(Pair("job", "fmnist"), Pair("namespace", "ns"),
                                       Pair("replica_index", "0"), Pair("replica_type", "worker")));
  EXPECT_EQ(page->samples[2].labels.at("le"), "+Inf");
  EXPECT_EQ(page->samples[3].name, "kubetrain_step_duration_seconds_sum");
  EXPECT_TRUE(page->samples[3].labels.empty());
  EXPECT_EQ(page->samples[3].value, 0.25);
  EXPECT_EQ(page->types.at("kubetrain_global_step"), "gauge");
  EXPECT_EQ(page->types.at("kubetrain_step_duration_seconds"), "histogram");
  EXPECT_EQ(page->help.at("kubetrain_global_step"), "Step this replica has reached.");
}

TEST(PrometheusTextTest, SpecialValuesTimestampsAndScientificNotation) {
  absl::StatusOr<PrometheusExposition> page = ParsePrometheusText(
      "a NaN\n"
      "b +Inf\n"
      "c -Inf 1700000000000\n"
      "d 1.5e-3 -42\n"
      "e -0\n"
      "f 12345678901234\n");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->samples.size(), 6u);
  EXPECT_TRUE(std::isnan(page->samples[0].value));
  EXPECT_TRUE(std::isinf(page->samples[1].value) && page->samples[1].value > 0);
  EXPECT_TRUE(std::isinf(page->samples[2].value) && page->samples[2].value < 0);
  EXPECT_EQ(page->samples[2].timestamp_ms, 1700000000000);
  EXPECT_DOUBLE_EQ(page->samples[3].value, 1.5e-3);
  EXPECT_EQ(page->samples[3].timestamp_ms, -42);
  EXPECT_EQ(page->samples[4].value, 0);
  EXPECT_EQ(page->samples[5].value, 12345678901234.0);
}

TEST(PrometheusTextTest, LabelValueEscapesAndHelpEscapes) {
  absl::StatusOr<PrometheusExposition> page = ParsePrometheusText(
      "# HELP m A \\\\ backslash\\nand a newline.\n"
      "m{path=\"C:\\\\dir\",quote=\"say \\\"hi\\\"\",nl=\"a\\nb\",brace=\"}{,=\"} 1\n");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->samples.size(), 1u);
  const auto& labels = page->samples[0].labels;
  EXPECT_EQ(labels.at("path"), "C:\\dir");
  EXPECT_EQ(labels.at("quote"), "say \"hi\"");
  EXPECT_EQ(labels.at("nl"), "a\nb");
  EXPECT_EQ(labels.at("brace"), "}{,=");
  EXPECT_EQ(page->help.at("m"), "A \\ backslash\nand a newline.");
}

TEST(PrometheusTextTest, WhitespaceCommentsCrLfAndTrailingComma) {
  absl::StatusOr<PrometheusExposition> page = ParsePrometheusText(
      "\n"
      "# a free comment, ignored\n"
      "#TYPE-like text that is no keyword\n"
      "   \t\n"
      "  spaced { a = \"1\" , b=\"2\", }   3.5   \t 10\r\n"
      "colon:name:total 4\r\n"
      "empty{} 5\n"
      "# EOF\n");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->samples.size(), 3u);
  EXPECT_EQ(page->samples[0].name, "spaced");
  EXPECT_THAT(page->samples[0].labels, ElementsAre(Pair("a", "1"), Pair("b", "2")));
  EXPECT_EQ(page->samples[0].value, 3.5);
  EXPECT_EQ(page->samples[0].timestamp_ms, 10);
  EXPECT_EQ(page->samples[1].name, "colon:name:total");
  EXPECT_EQ(page->samples[2].name, "empty");
  EXPECT_TRUE(page->samples[2].labels.empty());
  EXPECT_TRUE(page->types.empty());
}

TEST(PrometheusTextTest, EmptyTextHasNoSamples) {
  absl::StatusOr<PrometheusExposition> page = ParsePrometheusText("");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page->samples.empty());
}

struct Malformed {
  const char* text;
  int line;
  const char* what;
};

class MalformedTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedTest, IsInvalidArgumentNamingTheLine) {
  const Malformed& m = GetParam();
  absl::StatusOr<PrometheusExposition> page = ParsePrometheusText(m.text);
  ASSERT_FALSE(page.ok()) << "accepted: " << m.text;
  EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(page.status().message());
  EXPECT_THAT(message, HasSubstr("line " + std::to_string(m.line) + ":")) << message;
  EXPECT_THAT(message, HasSubstr(m.what)) << message;
}

INSTANTIATE_TEST_SUITE_P(
    Lines, MalformedTest,
    ::testing::Values(Malformed{"ok 1\nmissing_value\n", 2, "missing value"},
                      Malformed{"ok 1\n\nbad_value abc\n", 3, "invalid value \"abc\""},
                      Malformed{"1metric 1\n", 1, "invalid metric name"},
                      Malformed{"m-x 1\n", 1, "invalid character '-'"},
                      Malformed{"m{a=\"1\" 2\n", 1, "expected ',' or '}'"},
                      Malformed{"m{a=1} 2\n", 1, "expected '\"'"},
                      Malformed{"m{a \"1\"} 2\n", 1, "expected '='"},
                      Malformed{"m{1a=\"1\"} 2\n", 1, "invalid label name"},
                      Malformed{"m{a=\"1\",a=\"2\"} 2\n", 1, "duplicate label \"a\""},
                      Malformed{"m{a=\"open} 2\n", 1, "not closed"},
                      Malformed{"m{a=\"\\t\"} 2\n", 1, "invalid escape"},
                      Malformed{"m 1 notatime\n", 1, "invalid timestamp"},
                      Malformed{"m 1 2 3\n", 1, "text after the timestamp"},
                      Malformed{"m 1 1.5\n", 1, "invalid timestamp"},
                      Malformed{"# TYPE m gauge\n# TYPE m counter\n", 2, "second TYPE"},
                      Malformed{"# TYPE m sometype\n", 1, "unknown metric type"},
                      Malformed{"# TYPE m gauge extra\n", 1, "text after the type"},
                      Malformed{"# HELP m one\n# HELP m two\n", 2, "second HELP"},
                      Malformed{"# HELP 9m text\n", 1, "invalid metric name in HELP"},
                      Malformed{"a 1\r\nb 2\r\nc {\r\n", 3, "invalid label name"}));

TEST(PrometheusTextTest, ErrorQuotesTheLineShortened) {
  std::string long_line = "m{a=\"" + std::string(200, 'x') + "\"} oops";
  absl::StatusOr<PrometheusExposition> page = ParsePrometheusText(long_line);
  ASSERT_FALSE(page.ok());
  const std::string message(page.status().message());
  EXPECT_THAT(message, HasSubstr("\"m{a=\"xxx"));
  EXPECT_THAT(message, HasSubstr("...\""));
  EXPECT_LT(message.size(), 200u);
}

}  // namespace
}  // namespace kubetrain::controller
