// gRPC channel arguments the server and the client both set. Batches are
// large messages (a 4096 x 32 batch is 512 KiB): a wide flow-control window,
// big frames and big socket reads move one in a few syscalls instead of
// dozens (about 10% more batches/s, docs/service.md).
#ifndef KMT_PROTO_CHANNEL_TUNING_H_
#define KMT_PROTO_CHANNEL_TUNING_H_

#include <grpcpp/grpcpp.h>

namespace kmt {

// The largest message either end takes by default (ServerOptions and
// ClientOptions; the Python client's MAX_MESSAGE_BYTES is the same, as its
// tests check): a batch of a million float32 points in 16 dimensions.
inline constexpr int kMaxMessageBytes = 64 << 20;

// Adds the tuning to a client channel's arguments, and turns off gRPC's own
// retries (the client resends by itself).
void ApplyChannelTuning(grpc::ChannelArguments* args);

// Adds the tuning to every channel a server accepts.
void ApplyChannelTuning(grpc::ServerBuilder* builder);

}  // namespace kmt

#endif  // KMT_PROTO_CHANNEL_TUNING_H_
