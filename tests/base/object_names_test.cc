#include "base/object_names.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kubetrain::base {
namespace {

TEST(ObjectNamesTest, Dns1123Label) {
  for (const std::string& ok : std::vector<std::string>{"a", "default", "kube-system", "0abc",
                                                        "a1-b2", std::string(63, 'x')}) {
    EXPECT_TRUE(IsDns1123Label(ok)) << ok;
  }
  for (const std::string& bad : std::vector<std::string>{"", "-a", "a-", "A", "team a", "a.b",
                                                         "a_b", "ops{1}", std::string(64, 'x')}) {
    EXPECT_FALSE(IsDns1123Label(bad)) << bad;
  }
}

TEST(ObjectNamesTest, Dns1123Subdomain) {
  // As Kubernetes: 253 characters in all, no 63-character limit per label.
  for (const std::string& ok : std::vector<std::string>{"kubetrain-operator", "a.b.c",
                                                        "0.example.com", std::string(253, 'a')}) {
    EXPECT_TRUE(IsDns1123Subdomain(ok)) << ok;
  }
  for (const std::string& bad : std::vector<std::string>{"", ".a", "a.", "a..b", "A.b", "my lease",
                                                         "a.-b", "a/b", std::string(254, 'a')}) {
    EXPECT_FALSE(IsDns1123Subdomain(bad)) << bad;
  }
}

TEST(ObjectNamesTest, Dns1035Label) {
  EXPECT_TRUE(IsDns1035Label("mnist-ps-0"));
  EXPECT_FALSE(IsDns1035Label("0mnist"));  // must start with a letter
  EXPECT_FALSE(IsDns1035Label("mnist-"));
  EXPECT_FALSE(IsDns1035Label(""));
}

}  // namespace
}  // namespace kubetrain::base
