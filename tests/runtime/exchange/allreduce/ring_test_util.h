// In-process rings for allreduce tests: `world` RingAllreduce instances
// linked over loopback TCP, each driven by its own thread.
#ifndef KUBETRAIN_TESTS_RUNTIME_EXCHANGE_ALLREDUCE_RING_TEST_UTIL_H_
#define KUBETRAIN_TESTS_RUNTIME_EXCHANGE_ALLREDUCE_RING_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/exchange/allreduce/ring_allreduce.h"

namespace kubetrain::allreduce::testing_util {

// Links rank r's right side to rank r+1's left side, for every rank.
inline std::vector<std::unique_ptr<RingAllreduce>> MakeRing(int world, RingOptions options = {}) {
  std::vector<exchange::TcpListener> listeners;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<exchange::TcpListener> l = exchange::TcpListener::Listen("127.0.0.1", 0);
    EXPECT_TRUE(l.ok()) << l.status();
    listeners.push_back(*std::move(l));
  }
  std::vector<exchange::TcpConnection> right(static_cast<size_t>(world)),
      left(static_cast<size_t>(world));
  for (int r = 0; r < world && world > 1; ++r) {
    const int next = (r + 1) % world;
    absl::StatusOr<exchange::TcpConnection> c = exchange::TcpConnection::Connect(
        absl::StrCat("127.0.0.1:", listeners[static_cast<size_t>(next)].port()), 10, nullptr);
    EXPECT_TRUE(c.ok()) << c.status();
    right[static_cast<size_t>(r)] = *std::move(c);
    absl::StatusOr<exchange::TcpConnection> a =
        listeners[static_cast<size_t>(next)].Accept(10, nullptr);
    EXPECT_TRUE(a.ok()) << a.status();
    left[static_cast<size_t>(next)] = *std::move(a);
  }
  std::vector<std::unique_ptr<RingAllreduce>> ring;
  for (int r = 0; r < world; ++r) {
    ring.push_back(
        std::make_unique<RingAllreduce>(r, world, std::move(right[static_cast<size_t>(r)]),
                                        std::move(left[static_cast<size_t>(r)]), options));
  }
  return ring;
}

// Runs fn(rank) on one thread per rank; returns each rank's status.
inline std::vector<absl::Status> OnEveryRank(int world,
                                             const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> status(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] { status[static_cast<size_t>(r)] = fn(r); });
  }
  for (auto& t : threads) t.join();
  return status;
}

}  // namespace kubetrain::allreduce::testing_util

#endif  // KUBETRAIN_TESTS_RUNTIME_EXCHANGE_ALLREDUCE_RING_TEST_UTIL_H_
