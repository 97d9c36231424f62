// A fixed set of worker threads ("kmt-worker") running submitted tasks. Each
// worker caps the OpenMP threads of its tasks, so that concurrent batches
// share the cores instead of oversubscribing them. Workers take the
// scheduling policy of the thread that creates the pool.
//
// Tasks are taken by self-clocked fair queuing (Golestani, 1994) over flows,
// weighted by each task's cost, with the cheapest first within a band: a
// Cluster stream is a flow and a batch costs its bytes. A task's tag is
// max(V, its flow's last tag) + its cost, where V is the largest tag of the
// tasks taken so far. Workers take, among the queued tasks whose tag is at
// most the smallest tag plus that task's cost, the cheapest (then the
// smallest tag, then the earliest submitted).
//
// Why: first come, first served let one client that queues large batches
// hold every other client's batch for the whole queue's time. Fair queuing
// alone shares the workers by bytes between streams that keep the queue
// full, and tags a batch of a stream with nothing queued V + its bytes,
// ahead of the queued large ones; but streams that started together carry
// equal tags, and each would go first (a small batch waited for one large
// batch of every such stream). The band lets the cheaper task go first
// while costing the task at the smallest tag at most its own cost of
// cheaper work, so a large batch is never starved: every task taken raises
// V, by at least its cost when its stream had nothing queued, and once the
// tags of the cheaper tasks pass the band the large one is taken. Streams
// that keep the queue full still share it by bytes over any stretch longer
// than their batches. A task without a flow (a resident job's step, which
// its job waits for, one at a time) is taken before any task of a flow,
// first come first served.
#ifndef KMT_SERVER_WORKER_POOL_H_
#define KMT_SERVER_WORKER_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
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
  // A task of no flow: it is taken before any task of a flow.
  void Submit(std::function<void()> task) { Submit(0, 0, std::move(task)); }

  // For a running task of `cost` between its steps (a batch between its
  // layers): runs here queued tasks of flows that each cost at most
  // cost / kYieldRatio, the cheapest first (then by tag), up to that much
  // in all, so that a small batch waits for one layer of a large one
  // rather than for all of them, whatever its turn in the queue. The
  // running task is slowed by at most 1 / kYieldRatio of its cost per step,
  // and the queued large tasks wait for it no more than that. Tasks run so
  // leave V where it is: they took no worker from the queue's turns. Tasks
  // without a flow are left to the workers: their cost says nothing of
  // their length.
  void RunCheaper(int64_t cost);
  static constexpr int64_t kYieldRatio = 16;

  // The OpenMP threads a running task may use for its next stretch of
  // work: its own and those of the workers waiting for a task while none
  // is queued. A long task of steps (a resident mini-batch loop) asks
  // before each step and so lends itself the idle cores; a worker that
  // takes a task meanwhile shares its core for at most that step.
  int IdleThreads();

 private:
  struct Task {
    uint64_t flow;
    int64_t cost;
    std::function<void()> run;
  };
  // A flow's finish tag and tasks queued; dropped once none is queued, as
  // its tag is then at most V and a new task would start from V anyway.
  struct Flow {
    int64_t last_tag = 0;
    int queued = 0;
  };

  void Work(int threads_per_task);
  const int threads_per_task_;
  using Queue = std::map<std::pair<int64_t, uint64_t>, Task>;
  // The task of a flow to take next (the rule above); tasks_ is not empty.
  Queue::iterator Next();
  // Removes a queued task, its flow updated and V raised to its tag if
  // `advance`, and returns it to run.
  std::function<void()> Take(Queue::iterator it, bool advance);

  std::mutex mu_;
  std::condition_variable ready_;
  // By (tag, submission number).
  Queue tasks_;                                 // the tasks of flows
  std::deque<std::function<void()>> unflowed_;  // the tasks of no flow, in order
  // The same tasks by (cost, tag, submission number), for RunCheaper.
  std::set<std::tuple<int64_t, int64_t, uint64_t>> by_cost_;
  std::unordered_map<uint64_t, Flow> flows_;
  int64_t virtual_time_ = 0;  // V: the largest tag of the tasks taken so far
  uint64_t submitted_ = 0;
  uint64_t next_flow_ = 1;
  int waiting_ = 0;  // workers waiting for a task
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kmt

#endif  // KMT_SERVER_WORKER_POOL_H_
