#include "server/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>

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

}  // namespace
}  // namespace kmt
