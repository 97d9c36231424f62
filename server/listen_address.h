// Whether the server can listen on an address, checked before anything
// listens: the address parses as host:port, the host resolves, and a socket
// binds to it as gRPC's and the metrics server's would (SO_REUSEADDR, and
// SO_REUSEPORT when ports are shared). A port in use then stops the server
// with one line that names it, before the listeners' own errors.
#ifndef KMT_SERVER_LISTEN_ADDRESS_H_
#define KMT_SERVER_LISTEN_ADDRESS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kmt {

struct HostPort {
  std::string host;  ///< a name or an address literal, without IPv6's brackets
  std::string port;  ///< decimal, 0 to 65535
};

// "host:port" or "[v6 address]:port" split, or nullopt: an empty host, a
// port that is not a number up to 65535, an IPv6 address without brackets.
std::optional<HostPort> SplitHostPort(absl::string_view address);

// OK when a socket binds to some address `address` names ("host:port",
// "[v6]:port"; port 0 binds any), as gRPC needs only one of them. Else
// INVALID_ARGUMENT "is not host:port" for a malformed address, NOT_FOUND
// for a host that does not resolve, UNAVAILABLE "the address is in use", or
// FAILED_PRECONDITION with the bind's error; the message names the cause
// only, for the caller to prefix. Other forms gRPC takes ("unix:path") are
// OK here: gRPC checks them.
absl::Status CheckCanListen(const std::string& address, bool share_port);

}  // namespace kmt

#endif  // KMT_SERVER_LISTEN_ADDRESS_H_
