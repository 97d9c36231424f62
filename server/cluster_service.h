// The gRPC service, on gRPC's callback API: a Cluster stream hands each batch
// it reads to the shared worker pool and writes the responses in request
// order from whichever thread completes the next one, so a batch costs no
// thread hand-offs beyond the pool's. ListModels reads the registry. Job
// streams (server/job_reactor.h) keep a shard each, within the resident cap.
// LoadModel and UnloadModel change the registry for the clients
// ModelControl allows, and PERMISSION_DENIED the rest.
#ifndef KMT_SERVER_CLUSTER_SERVICE_H_
#define KMT_SERVER_CLUSTER_SERVICE_H_

#include <atomic>
#include <set>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "server/admission.h"
#include "server/job_reactor.h"
#include "server/limits.h"
#include "server/metrics.h"
#include "server/model_registry.h"
#include "server/model_reloader.h"
#include "server/worker_pool.h"

namespace kmt {

// Who may call LoadModel and UnloadModel.
struct ModelControl {
  bool enabled = false;  ///< false: nobody
  /// Over TLS, the client certificates allowed, by a subject alternative
  /// name or the common name; a client without one of them is refused.
  /// Plaintext servers cannot tell clients apart: every client is allowed.
  std::set<std::string> clients;
  bool tls = false;  ///< whether the server serves TLS
};

class ClusterService final : public v1::KMeansTransformer::CallbackService {
 public:
  // `max_in_flight` bounds the batches a stream has read and not yet
  // answered; past it the stream stops reading, and gRPC flow control holds
  // the client back. limits.max_held_bytes bounds the bytes of the batches
  // of all streams read and not yet answered; a batch past it is answered
  // RESOURCE_EXHAUSTED with a retry pushback at once (HeldRequests), and
  // the stream goes on. Both are resolved (HeldBudget, ResidentCap), as is
  // limits.max_resident_bytes, the resident cap. While draining, a stream whose batches are all
  // answered ends `drain_linger` later (ClusterReactor::Advance). After a LoadModel or UnloadModel,
  // `reloader` publishes what changed.
  ClusterService(ModelRegistry* registry, Limits limits, WorkerPool* pool, Metrics* metrics,
                 int max_in_flight, absl::Duration drain_linger, ModelControl control = {},
                 ModelReloader* reloader = nullptr);

  grpc::ServerBidiReactor<v1::ClusterRequest, v1::ClusterResponse>* Cluster(
      grpc::CallbackServerContext* context) override;
  grpc::ServerBidiReactor<v1::JobRequest, v1::JobResponse>* Job(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* LoadModel(grpc::CallbackServerContext* context,
                                      const v1::LoadModelRequest* request,
                                      v1::ModelControlResponse* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* context,
                                        const v1::UnloadModelRequest* request,
                                        v1::ModelControlResponse* response) override;

  // From now on, batches read are answered UNAVAILABLE at once (the client
  // sends them to another replica); batches already accepted finish.
  void StartDraining() { draining_ = true; }
  // No Cluster or Job stream is open: stopping now loses nothing.
  bool Idle() const { return open_streams_ == 0; }

 private:
  friend class ClusterReactor;

  // OK when this call's client may control models, else PERMISSION_DENIED
  // saying why.
  absl::Status MayControl(const grpc::CallbackServerContext* context) const;
  // LoadModel or UnloadModel: `change` applied to the registry for an
  // allowed client, the change published, logged, and the model described.
  using RegistryChange = absl::Status (ModelRegistry::*)(const std::string&, int64_t, ScanReport*);
  grpc::ServerUnaryReactor* Control(grpc::CallbackServerContext* context, absl::string_view rpc,
                                    const std::string& name, int64_t version, RegistryChange change,
                                    v1::ModelControlResponse* response);

  ModelRegistry* registry_;
  const Limits limits_;
  WorkerPool* pool_;
  Metrics* metrics_;
  const size_t max_in_flight_;
  const absl::Duration drain_linger_;
  std::atomic<bool> draining_{false};
  std::atomic<int> open_streams_{0};  // Cluster and Job streams not yet done
  HeldRequests held_;
  ResidentMemory resident_;
  const JobEnvironment job_environment_;
  const ModelControl control_;
  ModelReloader* const reloader_;
};

}  // namespace kmt

#endif  // KMT_SERVER_CLUSTER_SERVICE_H_
