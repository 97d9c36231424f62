// A thin client over the KMeansTransformer stub: open a channel (one address,
// a list with round-robin balancing, or dns:///), list models, and stream
// batches with responses delivered in request order. The server is
// stateless, so a batch answered UNAVAILABLE, or left unanswered by a stream
// that broke with UNAVAILABLE, is sent again on a new stream (which
// round-robin may place on another replica). A batch the server refused
// with a retry pushback (its budget of requests held was full) is sent again
// after the pause the pushback asks for, in place of the client's own
// backoff, as gRPC's retries honour grpc-retry-pushback-ms.
#ifndef KMT_CLIENT_CLUSTER_CLIENT_H_
#define KMT_CLIENT_CLUSTER_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/channel_tuning.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/transport_security.h"

namespace kmt {

struct ClientOptions {
  std::string target = "localhost:50051";      ///< address, "ipv4:a:p,b:q" or "dns:///host:port"
  std::string load_balancing = "round_robin";  ///< gRPC policy: round_robin or pick_first
  int max_message_bytes = kMaxMessageBytes;    ///< largest message sent or received
  int max_attempts = 3;  ///< sends of one batch on UNAVAILABLE, the first included
  /// Times one batch is sent again after the server pushed back (a batch
  /// refused RESOURCE_EXHAUSTED with a retry pushback: its budget of
  /// requests held was full), each after the pause the server asked for;
  /// past them, the refusal is the batch's answer.
  int max_pushbacks = 8;
  int window = 8;   ///< batches in flight on one stream
  int streams = 1;  ///< streams at once; round-robin spreads them over replicas
  /// Batches one stream carries before it ends and a new one is balanced
  /// anew: streams spread over replicas that became ready (or were added)
  /// after the first ones were opened.
  int batches_per_stream = 64;
  absl::Duration stream_timeout = absl::InfiniteDuration();  ///< deadline of each stream
  ChannelSecurity security;  ///< TLS settings (proto/transport_security.h); plaintext by default
};

// Produces the next request; false when there are no more.
using RequestSource = std::function<bool(v1::ClusterRequest*)>;
// Receives each response, in request order.
using ResponseSink = std::function<void(v1::ClusterResponse&&)>;

class Client {
 public:
  explicit Client(const ClientOptions& options);

  const ClientOptions& options() const { return options_; }

  absl::StatusOr<std::vector<v1::ModelInfo>> ListModels();

  // Streams every request from `source` (over `streams` concurrent streams)
  // and hands each response to `sink` in request order. Per-batch errors
  // arrive in their responses; the returned status is the stream-level
  // failure retries could not cure. `source` is called from gRPC's threads
  // and must not block long; `sink` is called on the calling thread and may
  // take its time: while it runs, and while the responses it has not taken
  // fill the window, no new request is sent. The two are never called at
  // once, so they need no locking of their own.
  absl::Status Cluster(const RequestSource& source, const ResponseSink& sink);

  // Batches sent again after UNAVAILABLE or a pushback, over this client's
  // life.
  int64_t resent() const { return resent_; }

 private:
  friend class ClusterSession;
  struct Shared;
  class Stream;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::KMeansTransformer::Stub> stub_;
  std::atomic<int64_t> resent_{0};
};

// One Cluster stream kept open for requests sent one at a time, each after
// the answer to the one before: for a caller whose next request depends on
// the last response (a mini-batch's steps), a request then costs a round trip
// rather than a stream's set-up. As in Client::Cluster, a batch answered
// UNAVAILABLE, or left unanswered by a stream that ended, goes out again on
// a new stream, up to `max_attempts` sends, and one the server pushed back
// goes out again on the same stream after the pause it asked for, up to
// `max_pushbacks` times; a new stream also follows every
// `batches_per_stream` requests, for round-robin to balance. With a finite
// `stream_timeout`, the deadline of each request, every request has a stream
// of its own. One thread at a time; the stream ends with the session, which
// must end before its client.
class ClusterSession {
 public:
  explicit ClusterSession(Client* client) : client_(client) {}
  ~ClusterSession() { (void)End(); }
  ClusterSession(const ClusterSession&) = delete;
  ClusterSession& operator=(const ClusterSession&) = delete;

  // The response to `request`, a batch's own error inside it; the status of
  // a stream failure that the retries could not cure.
  absl::StatusOr<v1::ClusterResponse> Send(const v1::ClusterRequest& request);

  // Ends the open stream, if any, and returns its status; the next Send
  // opens another.
  grpc::Status End();

 private:
  Client* const client_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ClusterRequest, v1::ClusterResponse>> stream_;
  int sent_ = 0;  // on the open stream
};

// A gRPC status as an absl::Status (same canonical codes).
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace kmt

#endif  // KMT_CLIENT_CLUSTER_CLIENT_H_
