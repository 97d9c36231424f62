// A fixed set of worker threads ("kmt-worker") running submitted tasks. Each
// worker caps the OpenMP threads of its tasks, so that concurrent batches
// share the cores instead of oversubscribing them. Workers take the
// scheduling policy of the thread that creates the pool.
//
// Tasks are taken by self-clocked fair queuing (Golestani, 1994) over flows,
// weighted by each task's cost: a Cluster stream is a flow and a batch costs
// its bytes. A task's finish tag is max(V, its flow's last tag) + its cost,
// where V is the tag of the task a worker took last, and workers take the
// smallest tag (the earliest submitted on a tie). So streams that keep the
// queue full share the workers by bytes; a batch on a stream with nothing
// queued is tagged V + its bytes, ahead of every queued batch larger than
// it (behind at most one batch of each other stream whose tag lies within
// its bytes of V), so a small batch does not wait behind a queue of large
// ones; and a large batch is never starved: every task taken raises V, by
// at least what it cost when it came from a stream that was idle, so
// within its own bytes of other work it is the smallest tag. First come,
// first served instead let one client that queues large batches hold every
// other client's batch for the whole queue's time. A task without a flow
// (a resident job's step, which its job waits for, one at a time) costs
// nothing and runs before the queued batches, first come first served.
#ifndef KMT_SERVER_WORKER_POOL_H_
#define KMT_SERVER_WORKER_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kmt {

class WorkerPool {
 public:
  WorkerPool(int workers, int threads_per_task);
  // Runs every task already submitted, then joins the workers.
  ~WorkerPool();

  // A flow id no other flow of this pool has (never 0).
  uint64_t NewFlow();
  // A task of `flow` costing `cost` (a batch: its bytes), queued fairly.
  void Submit(uint64_t flow, int64_t cost, std::function<void()> task);
  // A task of no flow: it runs before the tasks of flows already queued.
  void Submit(std::function<void()> task) { Submit(0, 0, std::move(task)); }

 private:
  struct Task {
    uint64_t flow;
    std::function<void()> run;
  };
  // A flow's finish tag and tasks queued; dropped once none is queued, as
  // its tag is then at most V and a new task would start from V anyway.
  struct Flow {
    int64_t last_tag = 0;
    int queued = 0;
  };

  void Work(int threads_per_task);

  std::mutex mu_;
  std::condition_variable ready_;
  // By (finish tag, submission number).
  std::map<std::pair<int64_t, uint64_t>, Task> tasks_;
  std::unordered_map<uint64_t, Flow> flows_;
  int64_t virtual_time_ = 0;  // the tag of the task taken last
  uint64_t submitted_ = 0;
  uint64_t next_flow_ = 1;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kmt

#endif  // KMT_SERVER_WORKER_POOL_H_
