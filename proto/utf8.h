// Text the contract's string fields carry. Protobuf requires them to be
// UTF-8, and a client refuses a whole message that holds other bytes
// (gRPC's C++ client then answers a unary call UNIMPLEMENTED, "No message
// returned for unary request", and a stream loses every answer after it),
// so what the server writes from outside bytes (a file name, a reason, a
// status message cut to a length) passes through here first.
#ifndef KMT_PROTO_UTF8_H_
#define KMT_PROTO_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace kmt {

// Whether `s` is UTF-8. Overlong forms, surrogates and code points past
// U+10FFFF are not.
bool IsUtf8(absl::string_view s);

// At most `bytes` bytes of a UTF-8 string, cut before a character rather
// than inside one.
absl::string_view Utf8Prefix(absl::string_view s, size_t bytes);

// `s` if it is UTF-8, else `s` with its non-ASCII bytes escaped (\xHH),
// which is.
std::string AsUtf8(absl::string_view s);

}  // namespace kmt

#endif  // KMT_PROTO_UTF8_H_
