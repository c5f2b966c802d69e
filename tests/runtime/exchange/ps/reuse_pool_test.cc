// ReusePool: hands out only buffers no reader holds, and reuses them.
#include "runtime/exchange/ps/reuse_pool.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace kubetrain::ps {
namespace {

struct Buffer {
  int value = 0;
};

class ReusePoolTest : public ::testing::Test {
 protected:
  std::shared_ptr<Buffer> Writable() {
    return pool_.Writable(current_, [this] {
      ++made_;
      return std::make_shared<Buffer>();
    });
  }

  ReusePool<Buffer> pool_;
  std::shared_ptr<Buffer> current_;
  int made_ = 0;
};

TEST_F(ReusePoolTest, MakesTheFirstBuffer) {
  current_ = Writable();
  ASSERT_NE(current_, nullptr);
  EXPECT_EQ(made_, 1);
  EXPECT_EQ(pool_.size(), 1u);
}

TEST_F(ReusePoolTest, WritesInPlaceWhenNoReaderHoldsTheCurrentBuffer) {
  current_ = Writable();
  EXPECT_EQ(Writable(), current_);
  EXPECT_EQ(made_, 1);
}

TEST_F(ReusePoolTest, NeverHandsOutABufferAReaderHolds) {
  current_ = Writable();
  std::shared_ptr<const Buffer> reader = current_;
  current_ = Writable();
  EXPECT_NE(current_, reader);
  EXPECT_EQ(made_, 2);
  // The first buffer is still read; the current one is free again, so it
  // is the one handed out.
  EXPECT_EQ(Writable(), current_);
  EXPECT_EQ(made_, 2);
}

TEST_F(ReusePoolTest, ReusesABufferOnceItsReaderLetGo) {
  current_ = Writable();
  std::shared_ptr<const Buffer> reader = current_;
  current_ = Writable();
  std::shared_ptr<const Buffer> second_reader = current_;  // both read now
  const Buffer* first = reader.get();
  reader.reset();  // the first one's reader is done
  EXPECT_EQ(Writable().get(), first);
  EXPECT_EQ(made_, 2);
}

TEST_F(ReusePoolTest, GrowsToTheReadersAtOncePlusOne) {
  std::vector<std::shared_ptr<const Buffer>> readers;
  current_ = Writable();
  for (int i = 0; i < 4; ++i) {
    readers.push_back(current_);  // a reader of every version
    current_ = Writable();
  }
  EXPECT_EQ(made_, 5);
  readers.clear();
  for (int i = 0; i < 10; ++i) {
    readers.push_back(current_);
    current_ = Writable();
    readers.clear();
  }
  EXPECT_EQ(made_, 5);
  EXPECT_EQ(pool_.size(), 5u);
}

}  // namespace
}  // namespace kubetrain::ps
