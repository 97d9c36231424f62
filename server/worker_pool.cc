#include "server/worker_pool.h"

#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <iterator>

namespace kmt {

WorkerPool::WorkerPool(int workers, int threads_per_task) : threads_per_task_(threads_per_task) {
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
    if (flow == 0) {
      unflowed_.push_back(std::move(task));
    } else {
      cost = std::max<int64_t>(cost, 0);
      Flow& f = flows_[flow];
      const int64_t tag = std::max(virtual_time_, f.last_tag) + cost;
      f.last_tag = tag;
      ++f.queued;
      const uint64_t number = submitted_++;
      by_cost_.emplace(cost, tag, number);
      tasks_.emplace(std::make_pair(tag, number), Task{flow, cost, std::move(task)});
    }
  }
  ready_.notify_one();
}

WorkerPool::Queue::iterator WorkerPool::Next() {
  // The band is scanned up to kBandScan tasks: past that many tasks at
  // nearly the smallest tag, the cheapest among them is near enough.
  constexpr int kBandScan = 256;
  auto best = tasks_.begin();
  const int64_t band = best->first.first + best->second.cost;
  int scanned = 0;
  for (auto it = std::next(best); it != tasks_.end() && it->first.first <= band; ++it) {
    if (++scanned > kBandScan) break;
    if (it->second.cost < best->second.cost) best = it;
  }
  return best;
}

std::function<void()> WorkerPool::Take(Queue::iterator it, bool advance) {
  if (advance) virtual_time_ = std::max(virtual_time_, it->first.first);
  const Task& taken = it->second;
  by_cost_.erase({taken.cost, it->first.first, it->first.second});
  auto f = flows_.find(taken.flow);
  if (--f->second.queued == 0) flows_.erase(f);
  std::function<void()> task = std::move(it->second.run);
  tasks_.erase(it);
  return task;
}

void WorkerPool::RunCheaper(int64_t cost) {
  for (int64_t left = cost / kYieldRatio;;) {
    std::function<void()> task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (by_cost_.empty()) return;
      const auto& [cheapest, tag, number] = *by_cost_.begin();
      if (cheapest > left) return;
      left -= cheapest;
      task = Take(tasks_.find({tag, number}), /*advance=*/false);
    }
    task();
  }
}

int WorkerPool::IdleThreads() {
  std::lock_guard<std::mutex> lock(mu_);
  const int idle = tasks_.empty() && unflowed_.empty() ? waiting_ : 0;
  return threads_per_task_ * (1 + idle);
}

void WorkerPool::Work(int threads_per_task) {
  pthread_setname_np(pthread_self(), "kmt-worker");  // as top -H and /proc show it
  omp_set_num_threads(threads_per_task);
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_;
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty() || !unflowed_.empty(); });
      --waiting_;
      if (!unflowed_.empty()) {
        task = std::move(unflowed_.front());
        unflowed_.pop_front();
      } else if (!tasks_.empty()) {
        task = Take(Next(), /*advance=*/true);
      } else {
        return;
      }
    }
    task();
  }
}

}  // namespace kmt
