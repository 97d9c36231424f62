// The order gRPC's callback API gives one reactor's reactions, told to
// ThreadSanitizer. gRPC orders them with its own locks and atomics inside
// Debian's libgrpc, which is not instrumented, so ThreadSanitizer cannot see
// that a read's buffer, filled by one thread, is handed to OnReadDone on
// another. These are the edges the API promises, and only those: starting an
// operation happens before its reaction, creating the reactor before
// OnCancel, every reaction before OnDone, setting an alarm before its
// callback. Reactions the API lets run at once (OnReadDone and OnWriteDone)
// stay unordered, so a race between them is still reported. In other builds
// every call is empty.
#ifndef KMT_PROTO_REACTOR_ORDER_H_
#define KMT_PROTO_REACTOR_ORDER_H_

#if defined(__SANITIZE_THREAD__)
#define KMT_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KMT_THREAD_SANITIZER 1
#endif
#endif

#ifdef KMT_THREAD_SANITIZER
#include <sanitizer/tsan_interface.h>
#endif

namespace kmt {

class ReactorOrder {
 public:
  enum Edge {
    kCreated,  ///< the reactor was built: before OnCancel
    kRead,     ///< a read was started: before its OnReadDone
    kWrite,    ///< a write was started: before its OnWriteDone
    kDone,     ///< a reaction ended, or Finish was called: before OnDone
    kAlarm,    ///< an alarm was set: before its callback
    kEdges,
  };

  // Before the operation `edge` names is started (or the reactor handed over).
  void Release(Edge edge) {
#ifdef KMT_THREAD_SANITIZER
    __tsan_release(&keys_[edge]);
#else
    (void)keys_[edge];
#endif
  }

  // First thing in the reaction that follows `edge`.
  void Acquire(Edge edge) {
#ifdef KMT_THREAD_SANITIZER
    __tsan_acquire(&keys_[edge]);
#else
    (void)keys_[edge];
#endif
  }

  // A reaction to `edge`, from its first line to its return (which OnDone
  // follows).
  class Reaction {
   public:
    Reaction(ReactorOrder* order, Edge edge) : order_(order) { order_->Acquire(edge); }
    ~Reaction() { order_->Release(kDone); }
    Reaction(const Reaction&) = delete;
    Reaction& operator=(const Reaction&) = delete;

   private:
    ReactorOrder* const order_;
  };

 private:
  char keys_[kEdges] = {};  // one address per edge, for ThreadSanitizer
};

}  // namespace kmt

#endif  // KMT_PROTO_REACTOR_ORDER_H_
