#include "proto/transport_security.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace kmt {
namespace {

// The contents of a PEM file, or an error naming it and the flag it came from.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not a PEM file"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const ServerTls& tls) {
  if (tls.cert_file.empty() && tls.key_file.empty()) {
    if (!tls.client_ca_file.empty()) {
      return absl::InvalidArgumentError("a client CA needs TLS: give the certificate and its key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and its private key");
  }
  // Read once here so that a bad path fails at start, not at the first
  // handshake; the provider reads them again on every refresh.
  for (const auto& [path, what] :
       {std::pair{tls.cert_file, "certificate"}, std::pair{tls.key_file, "private key"},
        std::pair{tls.client_ca_file, "client CA"}}) {
    if (path.empty()) continue;
    if (absl::StatusOr<std::string> pem = ReadPem(path, what); !pem.ok()) return pem.status();
  }
  const bool mutual = !tls.client_ca_file.empty();
  auto provider = mutual ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                               tls.key_file, tls.cert_file, tls.client_ca_file, tls.refresh_seconds)
                         : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                               tls.key_file, tls.cert_file, tls.refresh_seconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (mutual) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::Channel> ChannelSecurity::Connect(const std::string& target,
                                                        grpc::ChannelArguments args) const {
  if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
  return grpc::CreateCustomChannel(
      target, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials(), args);
}

absl::StatusOr<ChannelSecurity> ClientSecurity(const ClientTls& tls) {
  if (!tls.enabled) return ChannelSecurity{};
  grpc::SslCredentialsOptions options;
  if (!tls.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(tls.ca_file, "CA");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate needs its private key, and back");
  }
  if (!tls.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(tls.cert_file, "client certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(tls.key_file, "client private key");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  return ChannelSecurity{.credentials = grpc::SslCredentials(options),
                         .server_name = tls.server_name};
}

}  // namespace kmt
