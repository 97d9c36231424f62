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
}

void ApplyChannelTuning(grpc::ServerBuilder* builder) {
  for (const ChannelArgument& a : kTuning) builder->AddChannelArgument(a.name, a.value);
}

}  // namespace kmt
