#include "tests/integration/grpc_probe.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <future>

#include "client/cluster_client.h"

namespace kmt {
namespace {

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string Bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  (void)buffer.Dump(&slices);
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

}  // namespace

absl::StatusOr<int> HealthStatus(const std::string& address, const std::string& service) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  // HealthCheckRequest{service = 1}: tag 0x0a, length, bytes.
  std::string request;
  if (!service.empty()) request = std::string("\x0a", 1) + char(service.size()) + service;
  const grpc::ByteBuffer in = Buffer(request);
  grpc::ByteBuffer out;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", {}, &in, &out,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return FromGrpc(status);
  // HealthCheckResponse{status = 1}: tag 0x08, varint; absent means 0.
  const std::string bytes = Bytes(out);
  return bytes.size() >= 2 && bytes[0] == '\x08' ? static_cast<int>(bytes[1]) : 0;
}

absl::StatusOr<std::string> ReflectionListServices(const std::string& address) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::CompletionQueue cq;
  void* tag;
  bool ok;
  const auto step = [&](intptr_t want) {
    return cq.Next(&tag, &ok) && ok && reinterpret_cast<intptr_t>(tag) == want;
  };
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  const auto exchange = [&]() -> absl::StatusOr<std::string> {
    call->StartCall(reinterpret_cast<void*>(1));
    if (!step(1)) return absl::UnavailableError("reflection call did not start");
    // ServerReflectionRequest{list_services = 7: "*"}.
    call->Write(Buffer(std::string("\x3a\x01*", 3)), reinterpret_cast<void*>(2));
    if (!step(2)) return absl::UnavailableError("reflection request not sent");
    grpc::ByteBuffer response;
    call->Read(&response, reinterpret_cast<void*>(3));
    if (!step(3)) return absl::UnavailableError("no reflection response");
    return Bytes(response);
  };
  absl::StatusOr<std::string> result = exchange();
  context.TryCancel();
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return result;
}

}  // namespace kmt
