// Transport security, the one place both ends build their credentials.
// The server serves TLS from PEM files and, given a client CA, mutual TLS;
// it watches the files, so certificates rotate without a restart and open
// streams keep their connections. The client trusts a CA file (or the
// system's roots), may present its own certificate, and may verify the
// server under another name than the address it dials.
#ifndef KMT_PROTO_TRANSPORT_SECURITY_H_
#define KMT_PROTO_TRANSPORT_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kmt {

struct ServerTls {
  std::string cert_file;       ///< PEM certificate chain; empty: plaintext
  std::string key_file;        ///< PEM private key of the certificate
  std::string client_ca_file;  ///< PEM CA: if set, clients must present a certificate it signed
  int refresh_seconds = 10;    ///< how often the files are read again
};

struct ClientTls {
  bool enabled = false;     ///< false: plaintext
  std::string ca_file;      ///< PEM CA to trust; empty: the system's roots
  std::string cert_file;    ///< PEM client certificate, for mutual TLS
  std::string key_file;     ///< its private key
  std::string server_name;  ///< name to verify in the server's certificate; empty: the target's
};

// The server's credentials; a file that cannot be read, or a key without a
// certificate, is an error naming it.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const ServerTls& tls);

// How a client connects: its credentials (plaintext when null) and the name
// to verify in the server's certificate when it is not the target's.
struct ChannelSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string server_name;

  // A channel to `target` with `args` and these credentials.
  std::shared_ptr<grpc::Channel> Connect(const std::string& target,
                                         grpc::ChannelArguments args) const;
};

// The client's security from its settings; a file that cannot be read is an
// error naming it.
absl::StatusOr<ChannelSecurity> ClientSecurity(const ClientTls& tls);

}  // namespace kmt

#endif  // KMT_PROTO_TRANSPORT_SECURITY_H_
