// Shared points (ShardChunk.points_shared): a client on the server's own
// machine hands a resident shard's points over through a memory file
// instead of the wire. The client writes them into a memfd of its own,
// behind a random 16-byte token, and names the file by its process and
// descriptor; the server opens it as /proc/PID/fd/FD, which the kernel
// allows only to a process that may read the client's memory (the same
// user, or root), checks that it is a memfd of this protocol holding the
// token, and copies the points out with pread: one copy where the wire
// makes several (into the message, the socket, the server's message, the
// shard). A truncated or rewritten file gives the server a short read or
// other values, never a fault: what it copied is validated as wire points
// are. Linux only; elsewhere the writer cannot be made and the reader
// refuses, and the client sends its points over the wire.
#ifndef KMT_PROTO_SHARED_POINTS_H_
#define KMT_PROTO_SHARED_POINTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

// The token's length, the file's first bytes.
inline constexpr int64_t kSharedTokenBytes = 16;

// A client's memory file, mapped into the client: `slots` regions of
// `slot_bytes` after the token, each holding one chunk's points until the
// server has acknowledged it. The client writes a chunk's values into
// slot(s) and names them with Name.
class SharedPointsFile {
 public:
  // FAILED_PRECONDITION where the system has no memfd or cannot make or map
  // one.
  static absl::StatusOr<SharedPointsFile> Create(int64_t slot_bytes, int slots);
  SharedPointsFile(SharedPointsFile&& other) noexcept;
  SharedPointsFile& operator=(SharedPointsFile&& other) noexcept;
  SharedPointsFile(const SharedPointsFile&) = delete;
  SharedPointsFile& operator=(const SharedPointsFile&) = delete;
  ~SharedPointsFile();

  int slots() const { return slots_; }
  int64_t slot_bytes() const { return slot_bytes_; }
  // The bytes after the token, which the slots share.
  int64_t capacity() const { return capacity_; }
  // Where slot `s` (0 <= s < slots) starts in this process.
  char* slot(int s) const { return mapped_ + kSharedTokenBytes + s * slot_bytes_; }
  // Divides the file into `slots` slots of `slot_bytes` anew; false (and
  // the slots unchanged) where they need more than capacity().
  bool Reslot(int64_t slot_bytes, int slots);
  // The memory file's inode: the same for every descriptor of one file.
  int64_t inode() const;

  // Names the first `bytes` bytes of `slot` (values of float64 if
  // `float64`, else float32) in `out`; at most slot_bytes.
  absl::Status Name(int slot, int64_t bytes, bool float64, v1::SharedPoints* out) const;

 private:
  SharedPointsFile(int fd, char* mapped, int64_t slot_bytes, int slots, std::string token)
      : fd_(fd),
        mapped_(mapped),
        slot_bytes_(slot_bytes),
        slots_(slots),
        capacity_(slot_bytes * slots),
        token_(std::move(token)) {}
  void Close();

  int fd_ = -1;
  char* mapped_ = nullptr;  // the whole file, token first
  int64_t slot_bytes_ = 0;
  int slots_ = 0;
  int64_t capacity_ = 0;
  std::string token_;
};

// A memory file lent by the process's pool (TakeSharedPointsFile), given
// back when the lease ends; closed instead where it ends in another process
// than it began in (a forked child's copy of its parent's lease).
class SharedPointsLease {
 public:
  explicit SharedPointsLease(SharedPointsFile file);
  SharedPointsLease(SharedPointsLease&& other) noexcept
      : file_(std::move(other.file_)), pid_(other.pid_) {
    other.file_.reset();
  }
  SharedPointsLease& operator=(SharedPointsLease&&) = delete;
  ~SharedPointsLease();
  SharedPointsFile& operator*() { return *file_; }
  SharedPointsFile* operator->() { return &*file_; }

 private:
  std::optional<SharedPointsFile> file_;  // empty once moved from
  int64_t pid_;                           // the process the lease began in
};

// A memory file of `slots` slots of `slot_bytes`: an idle one of the
// process's that is large enough (the smallest such), else a new one.
// Making a file costs its pages, which the kernel allocates and clears one
// by one (20 ms for 16 MiB in a virtual machine, more than copying the
// points into them), so the files a load gives back are kept for the next:
// at most kSharedIdleFiles of them, the smallest dropped first, and none
// across a fork (a child's are its parent's files, which it must not
// write: it makes its own).
inline constexpr int kSharedIdleFiles = 4;
absl::StatusOr<SharedPointsLease> TakeSharedPointsFile(int64_t slot_bytes, int slots);
// How many files the pool holds idle (for tests).
int IdleSharedPointsFiles();

// Copies the `shared.bytes()` bytes `shared` names into `out`. A file that
// cannot be opened, is not a memfd of this protocol, lacks the token or ends
// before the points is FAILED_PRECONDITION, naming why; the caller checks
// the byte count against the chunk first.
absl::Status ReadSharedPoints(const v1::SharedPoints& shared, void* out);

// Whether a gRPC peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000",
// "unix:...") is a process on this machine: loopback or a Unix socket.
bool IsLocalPeer(absl::string_view peer);

// Whether a client's target ("127.0.0.1:50051", "localhost:50051",
// "[::1]:50051", "unix:..." with or without "dns:///" or "ipv4:") names a
// server on this machine.
bool IsLocalTarget(absl::string_view target);

}  // namespace kmt

#endif  // KMT_PROTO_SHARED_POINTS_H_
