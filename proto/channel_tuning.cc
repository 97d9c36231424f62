#include "proto/channel_tuning.h"

namespace kmt {
namespace {

struct ChannelArgument {
  const char* name;
  int value;
};

constexpr ChannelArgument kTuning[] = {
    {GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 << 20},
    {GRPC_ARG_TCP_READ_CHUNK_SIZE, 1 << 20},
    {GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 256 << 10},
    {GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 4 << 20},
};

}  // namespace

void ApplyChannelTuning(grpc::ChannelArguments* args) {
  for (const ChannelArgument& a : kTuning) args->SetInt(a.name, a.value);
  // No retries inside gRPC: the client resends what a stream left
  // unanswered itself (Client::Cluster, the resident job's failover). With
  // them on, Debian's gRPC 1.51 could leave a stream whose connection
  // failed with no reaction at all, past its deadline and past TryCancel,
  // and its Cluster call waited forever: threads that each open channels to
  // an address where nothing listens, with deadlines under a millisecond,
  // were stuck within a minute (tests/integration/client_retries_test.cc).
  args->SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
}

void ApplyChannelTuning(grpc::ServerBuilder* builder) {
  for (const ChannelArgument& a : kTuning) builder->AddChannelArgument(a.name, a.value);
}

}  // namespace kmt
