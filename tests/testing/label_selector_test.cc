#include "testing/label_selector.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kubetrain::kube {
namespace {

using ::testing::HasSubstr;
using Labels = std::map<std::string, std::string>;

LabelSelector MustParse(std::string_view s) {
  absl::StatusOr<LabelSelector> sel = LabelSelector::Parse(s);
  EXPECT_TRUE(sel.ok()) << s << ": " << sel.status();
  return sel.ok() ? *sel : LabelSelector();
}

std::string ParseError(std::string_view s) {
  absl::StatusOr<LabelSelector> sel = LabelSelector::Parse(s);
  EXPECT_FALSE(sel.ok()) << s << " parsed as " << sel->String();
  if (sel.ok()) return "";
  EXPECT_EQ(sel.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(sel.status().message());
}

TEST(LabelSelectorTest, EmptySelectsEverything) {
  LabelSelector sel = MustParse("");
  EXPECT_TRUE(sel.Empty());
  EXPECT_TRUE(sel.Matches(Labels{}));
  EXPECT_TRUE(sel.Matches(Labels{{"a", "b"}}));
  EXPECT_TRUE(sel.Matches(nlohmann::json()));
  EXPECT_EQ(sel.String(), "");
  EXPECT_TRUE(MustParse("   ").Empty());
}

// The selectors of transcript 01 against its three pods.
TEST(LabelSelectorTest, TranscriptSelectors) {
  Labels pa{{"app", "a"}, {"tier", "x"}}, pb{{"app", "a"}}, pc{{"app", "b"}, {"tier", "y"}};
  auto names = [&](std::string_view s) {
    LabelSelector sel = MustParse(s);
    std::string out;
    if (sel.Matches(pa)) out += "a";
    if (sel.Matches(pb)) out += "b";
    if (sel.Matches(pc)) out += "c";
    return out;
  };
  EXPECT_EQ(names("app=a"), "ab");
  EXPECT_EQ(names("app==a"), "ab");
  EXPECT_EQ(names("app!=a"), "c");
  EXPECT_EQ(names("tier in (x,y)"), "ac");
  EXPECT_EQ(names("tier notin (x)"), "bc");
  EXPECT_EQ(names("!tier"), "b");
  EXPECT_EQ(names("tier"), "ac");
  EXPECT_EQ(names("app=a,tier=x"), "a");
  EXPECT_EQ(names("app=zzz"), "");
}

TEST(LabelSelectorTest, WhitespaceIsIgnored) {
  EXPECT_EQ(MustParse("  app = a ,  tier   in(x,  y) , ! gone ").String(),
            "app=a,!gone,tier in (x,y)");
}

TEST(LabelSelectorTest, CanonicalStringRoundTrips) {
  for (std::string_view s : {"z=1,a!=2,m in (c,b,a),k notin (q),e,!d", "example.com/role=chief",
                             "a=", "kubetrain.io/job-name=fmnist"}) {
    LabelSelector sel = MustParse(s);
    LabelSelector again = MustParse(sel.String());
    EXPECT_EQ(again.String(), sel.String()) << s;
  }
  EXPECT_EQ(MustParse("z=1,a!=2,m in (c,b,a),k notin (q),e,!d").String(),
            "a!=2,!d,e,k notin (q),m in (a,b,c),z=1");
}

TEST(LabelSelectorTest, EmptyValueMatchesEmptyOrMissing) {
  LabelSelector eq = MustParse("a=");
  EXPECT_TRUE(eq.Matches(Labels{{"a", ""}}));
  EXPECT_FALSE(eq.Matches(Labels{}));
  LabelSelector ne = MustParse("a!=x");
  EXPECT_TRUE(ne.Matches(Labels{}));  // absent labels satisfy != and notin
  EXPECT_TRUE(MustParse("a notin (x)").Matches(Labels{}));
}

TEST(LabelSelectorTest, JsonLabelsObject) {
  LabelSelector sel = MustParse("app=a");
  EXPECT_TRUE(sel.Matches(nlohmann::json{{"app", "a"}, {"x", "y"}}));
  EXPECT_FALSE(sel.Matches(nlohmann::json()));
  EXPECT_TRUE(MustParse("!app").Matches(nlohmann::json()));
}

TEST(LabelSelectorTest, InvalidSyntaxMatchesApiserverMessage) {
  // Transcript 01: labelSelector "app==>a".
  EXPECT_EQ(ParseError("app==>a"), "unable to parse requirement: found '>', expected: identifier");
  EXPECT_THAT(ParseError("app in x"), HasSubstr("expected: '('"));
  EXPECT_THAT(ParseError("app in (x"), HasSubstr("unable to parse requirement"));
  EXPECT_THAT(ParseError("a=b c"), HasSubstr("found 'c'"));
  EXPECT_THAT(ParseError("a=b,"), HasSubstr("unable to parse requirement"));
  EXPECT_THAT(ParseError("!"), HasSubstr("expected: identifier"));
  EXPECT_THAT(ParseError("a>1"), HasSubstr("'>'"));
  EXPECT_THAT(ParseError("app in ()"), HasSubstr("values set can't be empty"));
}

TEST(LabelSelectorTest, InvalidKeysAndValuesNameTheBadPart) {
  EXPECT_THAT(ParseError("bad_key_-=x"), HasSubstr("key: Invalid value: \"bad_key_-\""));
  EXPECT_THAT(ParseError(std::string(64, 'k') + "=x"),
              HasSubstr("name part must be no more than 63 characters"));
  EXPECT_THAT(ParseError("Bad.Prefix/name=x"), HasSubstr("prefix part"));
  EXPECT_THAT(ParseError("a/b/c=x"), HasSubstr("qualified name"));
  EXPECT_THAT(ParseError("/name=x"), HasSubstr("prefix part must be non-empty"));
  EXPECT_THAT(ParseError("a=-bad"), HasSubstr("values[0][a]: Invalid value: \"-bad\""));
  EXPECT_THAT(ParseError(absl::StrCat("a=", std::string(64, 'v'))),
              HasSubstr("must be no more than 63 characters"));
  EXPECT_EQ(ValidateLabelKey("example.com/ok-Name_1.x"), "");
  EXPECT_EQ(ValidateLabelValue(""), "");
}

TEST(LabelSelectorTest, FromJsonMatchLabelsAndExpressions) {
  absl::StatusOr<LabelSelector> sel = LabelSelector::FromJson(nlohmann::json::parse(R"({
    "matchLabels": {"app": "a"},
    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x", "y"]},
                         {"key": "gone", "operator": "DoesNotExist"},
                         {"key": "env", "operator": "NotIn", "values": ["prod"]},
                         {"key": "team", "operator": "Exists"}]})"));
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_EQ(sel->String(), "app=a,env notin (prod),!gone,team,tier in (x,y)");
  EXPECT_TRUE(sel->Matches(Labels{{"app", "a"}, {"tier", "x"}, {"team", "t"}}));
  EXPECT_FALSE(sel->Matches(Labels{{"app", "a"}, {"tier", "x"}}));
  EXPECT_FALSE(sel->Matches(Labels{{"app", "a"}, {"tier", "x"}, {"team", "t"}, {"gone", "1"}}));

  EXPECT_TRUE(LabelSelector::FromJson(nlohmann::json::object())->Empty());
  EXPECT_TRUE(LabelSelector::FromJson(nlohmann::json())->Empty());
  absl::StatusOr<LabelSelector> bad = LabelSelector::FromJson(
      nlohmann::json::parse(R"({"matchExpressions":[{"key":"a","operator":"Near"}]})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("\"Near\""));
  EXPECT_FALSE(LabelSelector::FromJson(
                   nlohmann::json::parse(R"({"matchExpressions":[{"key":"a","operator":"In"}]})"))
                   .ok());
}

TEST(LabelSelectorTest, FromMatchLabelsAndEqualityRequirements) {
  LabelSelector sel = LabelSelector::FromMatchLabels({{"b", "2"}, {"a", "1"}});
  EXPECT_EQ(sel.String(), "a=1,b=2");
  EXPECT_THAT(sel.EqualityRequirements(),
              ::testing::ElementsAre(std::pair<std::string, std::string>("a", "1"),
                                     std::pair<std::string, std::string>("b", "2")));
  EXPECT_THAT(MustParse("a in (x),b in (x,y),c!=d,e").EqualityRequirements(),
              ::testing::ElementsAre(std::pair<std::string, std::string>("a", "x")));
}

}  // namespace
}  // namespace kubetrain::kube
