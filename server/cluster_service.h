// The gRPC service: Cluster streams run their batches on the shared worker
// pool and answer in request order; ListModels reads the registry.
#ifndef KMT_SERVER_CLUSTER_SERVICE_H_
#define KMT_SERVER_CLUSTER_SERVICE_H_

#include <atomic>

#include "proto/kmeans_transformer.grpc.pb.h"
#include "server/limits.h"
#include "server/model_registry.h"
#include "server/worker_pool.h"

namespace kmt {

class ClusterService final : public v1::KMeansTransformer::Service {
 public:
  // `max_in_flight` bounds the batches a stream has read and not yet
  // answered; past it the stream stops reading, and gRPC flow control holds
  // the client back.
  ClusterService(const ModelRegistry* registry, Limits limits, WorkerPool* pool,
                 int max_in_flight);

  grpc::Status Cluster(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ClusterResponse, v1::ClusterRequest>* stream)
      override;
  grpc::Status ListModels(grpc::ServerContext* context,
                          const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;

  // From now on, batches read are answered UNAVAILABLE at once (the client
  // sends them to another replica); batches already accepted finish.
  void StartDraining() { draining_ = true; }

 private:
  const ModelRegistry* registry_;
  const Limits limits_;
  WorkerPool* pool_;
  const size_t max_in_flight_;
  std::atomic<bool> draining_{false};
};

}  // namespace kmt

#endif  // KMT_SERVER_CLUSTER_SERVICE_H_
