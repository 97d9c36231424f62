#include "server/worker_pool.h"

#include <omp.h>
#include <pthread.h>

namespace kmt {

WorkerPool::WorkerPool(int workers, int threads_per_task) {
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this, threads_per_task] { Work(threads_per_task); });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void WorkerPool::Work(int threads_per_task) {
  pthread_setname_np(pthread_self(), "kmt-worker");  // as top -H and /proc show it
  omp_set_num_threads(threads_per_task);
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace kmt
