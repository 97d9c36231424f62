// A fixed set of worker threads ("kmt-worker") running submitted tasks in
// order of submission. Each worker caps the OpenMP threads of its tasks, so
// that concurrent batches share the cores instead of oversubscribing them.
// Workers take the scheduling policy of the thread that creates the pool.
#ifndef KMT_SERVER_WORKER_POOL_H_
#define KMT_SERVER_WORKER_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kmt {

class WorkerPool {
 public:
  WorkerPool(int workers, int threads_per_task);
  // Runs every task already submitted, then joins the workers.
  ~WorkerPool();

  void Submit(std::function<void()> task);

 private:
  void Work(int threads_per_task);

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kmt

#endif  // KMT_SERVER_WORKER_POOL_H_
