#include "server/listen_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace kmt {
namespace {

// Binds and listens on one resolved address, then closes the socket; 0 or
// the errno of the step that failed.
int TryListen(const addrinfo& address, bool share_port) {
  const int fd = socket(address.ai_family, address.ai_socktype | SOCK_CLOEXEC, address.ai_protocol);
  if (fd < 0) return errno;
  const int on = 1;
  int error = 0;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
      (share_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) != 0) ||
      bind(fd, address.ai_addr, address.ai_addrlen) != 0 || listen(fd, 1) != 0) {
    error = errno;
  }
  close(fd);
  return error;
}

absl::Status BindError(int error, const HostPort& address) {
  switch (error) {
    case EADDRINUSE:
      return absl::UnavailableError("the address is in use");
    case EADDRNOTAVAIL:
      return absl::FailedPreconditionError("the address is not one of this machine's");
    case EACCES:
      return absl::PermissionDeniedError(
          std::stoi(address.port) < 1024 ? "permission denied (ports below 1024 need privileges)"
                                         : "permission denied");
    default:
      return absl::FailedPreconditionError(std::strerror(error));
  }
}

}  // namespace

std::optional<HostPort> SplitHostPort(absl::string_view address) {
  absl::string_view host, port;
  if (absl::ConsumePrefix(&address, "[")) {
    const size_t close = address.find("]:");
    if (close == absl::string_view::npos) return std::nullopt;
    host = address.substr(0, close);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return std::nullopt;
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (absl::StrContains(host, ':')) return std::nullopt;
  }
  int number = 0;
  const bool digits = !port.empty() && port.size() <= 5 &&
                      std::all_of(port.begin(), port.end(), absl::ascii_isdigit);
  if (host.empty() || !digits || !absl::SimpleAtoi(port, &number) || number > 65535) {
    return std::nullopt;
  }
  return HostPort{std::string(host), std::string(port)};
}

absl::Status CheckCanListen(const std::string& address, bool share_port) {
  for (absl::string_view scheme : {"unix:", "unix-abstract:", "vsock:"}) {
    if (absl::StartsWith(address, scheme)) return absl::OkStatus();
  }
  const std::optional<HostPort> parts = SplitHostPort(address);
  if (!parts) return absl::InvalidArgumentError("is not host:port");
  addrinfo hints{};
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  const int lookup = getaddrinfo(parts->host.c_str(), parts->port.c_str(), &hints, &resolved);
  if (lookup != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot resolve ", parts->host, " (", gai_strerror(lookup), ")"));
  }
  int first_error = 0;
  for (const addrinfo* a = resolved; a != nullptr; a = a->ai_next) {
    const int error = TryListen(*a, share_port);
    if (error == 0) {
      first_error = 0;
      break;
    }
    if (first_error == 0) first_error = error;
  }
  freeaddrinfo(resolved);
  return first_error == 0 ? absl::OkStatus() : BindError(first_error, *parts);
}

}  // namespace kmt
