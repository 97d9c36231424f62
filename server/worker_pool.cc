#include "server/worker_pool.h"

#include <omp.h>
#include <pthread.h>

#include <algorithm>

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

uint64_t WorkerPool::NewFlow() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_flow_++;
}

void WorkerPool::Submit(uint64_t flow, int64_t cost, std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t tag = virtual_time_;
    if (flow != 0) {
      Flow& f = flows_[flow];
      tag = std::max(tag, f.last_tag) + std::max<int64_t>(cost, 0);
      f.last_tag = tag;
      ++f.queued;
    }
    tasks_.emplace(std::make_pair(tag, submitted_++), Task{flow, std::move(task)});
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
      auto first = tasks_.begin();
      virtual_time_ = first->first.first;
      if (const uint64_t flow = first->second.flow; flow != 0) {
        auto f = flows_.find(flow);
        if (--f->second.queued == 0) flows_.erase(f);
      }
      task = std::move(first->second.run);
      tasks_.erase(first);
    }
    task();
  }
}

}  // namespace kmt
