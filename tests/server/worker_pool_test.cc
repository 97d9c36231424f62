#include "server/worker_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kmt {
namespace {

TEST(WorkerPool, RunsEverySubmittedTaskBeforeItIsDestroyed) {
  std::atomic<int> done{0};
  {
    WorkerPool pool(3, 1);
    for (int i = 0; i < 500; ++i) pool.Submit([&done] { ++done; });
  }
  EXPECT_EQ(done.load(), 500);
}

TEST(WorkerPool, TasksRunOnTheNamedWorkersAtOnce) {
  std::mutex mu;
  std::condition_variable cv;
  int waiting = 0;
  std::set<std::thread::id> threads;
  std::vector<std::string> names;
  {
    WorkerPool pool(2, 1);
    // Two tasks that each wait for the other: they finish only if two
    // workers run them at the same time.
    for (int i = 0; i < 2; ++i) {
      pool.Submit([&] {
        char name[16] = {};
        pthread_getname_np(pthread_self(), name, sizeof(name));
        std::unique_lock<std::mutex> lock(mu);
        threads.insert(std::this_thread::get_id());
        names.emplace_back(name);
        ++waiting;
        cv.notify_all();
        cv.wait(lock, [&] { return waiting == 2; });
      });
    }
  }
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_EQ(names, (std::vector<std::string>{"kmt-worker", "kmt-worker"}));
}

// The order in which one worker takes tasks: the worker is held by a first
// task until every task under test is queued, so the queue alone decides.
class QueueOrder {
 public:
  QueueOrder() {
    pool_.emplace(1, 1);
    pool_->Submit([this] {
      std::unique_lock<std::mutex> lock(mu_);
      released_.wait(lock, [this] { return open_; });
    });
  }
  // A task that records `name` when it runs.
  std::function<void()> Record(std::string name) {
    return [this, name] {
      std::lock_guard<std::mutex> lock(mu_);
      order_.push_back(name);
    };
  }
  WorkerPool& pool() { return *pool_; }
  // Lets the worker go, waits for every task and returns their order.
  std::vector<std::string> Run() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    released_.notify_all();
    pool_.reset();
    return order_;
  }

 private:
  std::mutex mu_;
  std::condition_variable released_;
  bool open_ = false;
  std::vector<std::string> order_;
  std::optional<WorkerPool> pool_;  // last: its tasks use the members above
};

TEST(WorkerPool, ASmallTaskOfAnIdleFlowGoesBeforeAQueueOfLargeOnes) {
  QueueOrder queue;
  const uint64_t large = queue.pool().NewFlow(), small = queue.pool().NewFlow();
  for (int i = 0; i < 4; ++i) {
    queue.pool().Submit(large, 64 << 20, queue.Record("large" + std::to_string(i)));
  }
  queue.pool().Submit(small, 64 << 10, queue.Record("small"));
  EXPECT_EQ(queue.Run(),
            (std::vector<std::string>{"small", "large0", "large1", "large2", "large3"}));
}

TEST(WorkerPool, BackloggedFlowsShareTheWorkersByCost) {
  QueueOrder queue;
  const uint64_t a = queue.pool().NewFlow(), b = queue.pool().NewFlow();
  for (int i = 0; i < 6; ++i) queue.pool().Submit(a, 100, queue.Record("a"));
  for (int i = 0; i < 3; ++i) queue.pool().Submit(b, 200, queue.Record("b"));
  // Tags a: 100..600, b: 200, 400, 600: two a for each b, the cheaper a
  // first within the band of b's cost.
  EXPECT_EQ(queue.Run(), (std::vector<std::string>{"a", "a", "a", "a", "b", "a", "a", "b", "b"}));
}

TEST(WorkerPool, FlowsInLockstepDoNotEachGoBeforeASmallTask) {
  // Three flows that started together carry equal tags; the small task
  // queued once the first of them has run goes next, not after one task of
  // each.
  QueueOrder queue;
  WorkerPool& pool = queue.pool();
  const uint64_t a = pool.NewFlow(), b = pool.NewFlow(), c = pool.NewFlow();
  const std::function<void()> record_a = queue.Record("a");
  pool.Submit(a, 1000, [&pool, record_a, small = queue.Record("small")] {
    record_a();
    pool.Submit(pool.NewFlow(), 10, small);
  });
  pool.Submit(b, 1000, queue.Record("b"));
  pool.Submit(c, 1000, queue.Record("c"));
  for (int i = 0; i < 2; ++i) {
    pool.Submit(a, 1000, queue.Record("a"));
    pool.Submit(b, 1000, queue.Record("b"));
    pool.Submit(c, 1000, queue.Record("c"));
  }
  EXPECT_EQ(queue.Run(),
            (std::vector<std::string>{"a", "small", "b", "c", "a", "b", "c", "a", "b", "c"}));
}

TEST(WorkerPool, ARunningTaskRunsMuchCheaperQueuedOnesBetweenItsSteps) {
  QueueOrder queue;
  WorkerPool& pool = queue.pool();
  constexpr int64_t kCost = 32 * WorkerPool::kYieldRatio, kShare = kCost / WorkerPool::kYieldRatio;
  // Queued while the large task runs, as batches arriving behind it; each
  // step lets through a sixteenth of its cost, the cheapest first.
  pool.Submit(pool.NewFlow(), kCost,
              [&pool, &queue, step = queue.Record("step"), end = queue.Record("end")] {
                step();
                pool.Submit(pool.NewFlow(), kShare + 1, queue.Record("too costly"));
                pool.Submit(pool.NewFlow(), kShare / 2, queue.Record("half 1"));
                pool.Submit(pool.NewFlow(), kShare / 2, queue.Record("half 2"));
                pool.Submit(pool.NewFlow(), kShare / 4, queue.Record("quarter"));
                pool.RunCheaper(kCost);
                step();
                pool.RunCheaper(kCost);
                end();
              });
  pool.Submit(pool.NewFlow(), kCost, queue.Record("as large"));
  pool.Submit(queue.Record("no flow"));
  EXPECT_EQ(queue.Run(), (std::vector<std::string>{"no flow", "step", "quarter", "half 1", "step",
                                                   "half 2", "end", "too costly", "as large"}));
}

TEST(WorkerPool, TasksWithoutAFlowGoFirstInTheOrderSubmitted) {
  QueueOrder queue;
  const uint64_t flow = queue.pool().NewFlow();
  queue.pool().Submit(flow, 1, queue.Record("batch0"));
  queue.pool().Submit(flow, 1, queue.Record("batch1"));
  queue.pool().Submit(queue.Record("step0"));
  queue.pool().Submit(queue.Record("step1"));
  EXPECT_EQ(queue.Run(), (std::vector<std::string>{"step0", "step1", "batch0", "batch1"}));
}

TEST(WorkerPool, ALargeTaskIsNotStarvedByEverNewFlowsOfSmallOnes) {
  // Each small task, when it runs, queues the next on a flow of its own, as
  // clients that open a stream per batch would; the large task must run
  // once small tasks of twice its cost have run before it: its own cost to
  // reach its turn, and its own cost of cheaper tasks within its band.
  constexpr int kSmall = 100, kLarge = 1000, kTasks = 50;
  std::vector<std::string> order;  // written by the one worker only
  std::function<void(int)> small;
  std::mutex gate;
  {
    WorkerPool pool(1, 1);
    gate.lock();
    pool.Submit([&gate] { std::lock_guard<std::mutex> hold(gate); });
    small = [&](int i) {
      order.push_back("small");
      if (i + 1 < kTasks) pool.Submit(pool.NewFlow(), kSmall, [&small, i] { small(i + 1); });
    };
    pool.Submit(pool.NewFlow(), kLarge, [&order] { order.push_back("large"); });
    pool.Submit(pool.NewFlow(), kSmall, [&small] { small(0); });
    gate.unlock();
  }
  ASSERT_EQ(order.size(), static_cast<size_t>(kTasks + 1));
  const auto large = std::find(order.begin(), order.end(), "large");
  EXPECT_LE(large - order.begin(), 2 * kLarge / kSmall);
}

// Waits (up to a minute) until `ready` holds; whether it did.
bool Eventually(const std::function<bool()>& ready) {
  for (int i = 0; i < 60000; ++i) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ready();
}

// A running task is lent the threads of the workers waiting for a task,
// none of a worker that is busy, and none while a task is queued (a
// waiting worker is about to take it).
TEST(WorkerPool, IdleThreadsAreTheCallersAndThoseOfTheWorkersWithNothingToTake) {
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  bool release = false;
  const auto hold = [&] {
    std::unique_lock<std::mutex> lock(mu);
    ++started;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  std::vector<int> seen;
  {
    WorkerPool pool(3, 2);
    pool.Submit([&] {
      // The two other workers waiting: three workers' threads.
      EXPECT_TRUE(Eventually([&] { return pool.IdleThreads() == 6; }));
      pool.Submit(hold);
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return started == 1; });
      }
      EXPECT_TRUE(Eventually([&] { return pool.IdleThreads() == 4; }));
      pool.Submit(hold);
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return started == 2; });
      }
      seen.push_back(pool.IdleThreads());  // every worker busy: its own
      pool.Submit(hold);                   // queued, no worker to take it
      seen.push_back(pool.IdleThreads());
      {
        std::lock_guard<std::mutex> lock(mu);
        release = true;
      }
      cv.notify_all();
    });
    // The pool kept until the first task is done: stopping, its workers
    // would stop waiting.
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
  }
  EXPECT_EQ(seen, (std::vector<int>{2, 2}));
  EXPECT_EQ(started, 3);
}

}  // namespace
}  // namespace kmt
