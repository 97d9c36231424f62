#include "proto/shared_points.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#ifdef __linux__
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace kmt {
namespace {

// The memfd's name, which /proc shows as "/memfd:kmt-points (deleted)".
constexpr char kMemfdName[] = "kmt-points";

#ifdef __linux__
absl::Status Errno(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Reads all `bytes` at `offset`, across short reads; how many it read.
int64_t Whole(int fd, char* data, int64_t bytes, int64_t offset) {
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t step = pread(fd, data + done, static_cast<size_t>(bytes - done), offset + done);
    if (step < 0 && errno == EINTR) continue;
    if (step <= 0) break;
    done += step;
  }
  return done;
}
#endif

}  // namespace

absl::StatusOr<SharedPointsFile> SharedPointsFile::Create(int64_t slot_bytes, int slots) {
  if (slot_bytes < 1 || slots < 1) {
    return absl::InvalidArgumentError("shared points need a slot of at least one byte");
  }
#ifdef __linux__
  std::string token(kSharedTokenBytes, '\0');
  if (getrandom(token.data(), token.size(), 0) != static_cast<ssize_t>(token.size())) {
    return Errno("shared points: no random token");
  }
  const int fd = memfd_create(kMemfdName, MFD_CLOEXEC);
  if (fd < 0) return Errno("shared points: memfd_create");
  const int64_t size = kSharedTokenBytes + slot_bytes * slots;
  if (ftruncate(fd, size) != 0) {
    const absl::Status status = Errno("shared points: sizing the memory file");
    close(fd);
    return status;
  }
  // Its pages are made at once: the chunks are written into them in turn.
  void* mapped = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_POPULATE, fd, 0);
  if (mapped == MAP_FAILED) {
    const absl::Status status = Errno("shared points: mapping the memory file");
    close(fd);
    return status;
  }
  SharedPointsFile file(fd, static_cast<char*>(mapped), slot_bytes, slots, std::move(token));
  std::memcpy(file.mapped_, file.token_.data(), kSharedTokenBytes);
  return file;
#else
  return absl::FailedPreconditionError("shared points need Linux's memfd");
#endif
}

SharedPointsFile::SharedPointsFile(SharedPointsFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      mapped_(std::exchange(other.mapped_, nullptr)),
      slot_bytes_(other.slot_bytes_),
      slots_(other.slots_),
      capacity_(other.capacity_),
      token_(std::move(other.token_)) {}

SharedPointsFile& SharedPointsFile::operator=(SharedPointsFile&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    mapped_ = std::exchange(other.mapped_, nullptr);
    slot_bytes_ = other.slot_bytes_;
    slots_ = other.slots_;
    capacity_ = other.capacity_;
    token_ = std::move(other.token_);
  }
  return *this;
}

SharedPointsFile::~SharedPointsFile() { Close(); }

void SharedPointsFile::Close() {
#ifdef __linux__
  if (mapped_ != nullptr) munmap(mapped_, static_cast<size_t>(kSharedTokenBytes + capacity_));
  if (fd_ >= 0) close(fd_);
#endif
  mapped_ = nullptr;
  fd_ = -1;
}

bool SharedPointsFile::Reslot(int64_t slot_bytes, int slots) {
  if (slot_bytes < 1 || slots < 1 || slot_bytes > capacity_ / slots) return false;
  slot_bytes_ = slot_bytes;
  slots_ = slots;
  return true;
}

int64_t SharedPointsFile::inode() const {
#ifdef __linux__
  struct stat st;
  if (fd_ >= 0 && fstat(fd_, &st) == 0) return static_cast<int64_t>(st.st_ino);
#endif
  return -1;
}

namespace {

// The process's idle memory files, and the process they were made in.
struct SharedPool {
  std::mutex mu;
  std::vector<SharedPointsFile> idle;  // guarded by mu
  int64_t pid = -1;                    // guarded by mu
};

SharedPool& Pool() {
  static SharedPool* pool = new SharedPool;
  return *pool;
}

int64_t ThisProcess() {
#ifdef __linux__
  return getpid();
#else
  return 0;
#endif
}

// Drops the files a parent made (the caller holds the pool's lock): closing
// them here leaves the parent's open.
void ForgetParentsFiles(SharedPool& pool) {
  if (pool.pid != ThisProcess()) {
    pool.idle.clear();
    pool.pid = ThisProcess();
  }
}

}  // namespace

absl::StatusOr<SharedPointsLease> TakeSharedPointsFile(int64_t slot_bytes, int slots) {
  if (slot_bytes < 1 || slots < 1) {
    return absl::InvalidArgumentError("shared points need a slot of at least one byte");
  }
  SharedPool& pool = Pool();
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    ForgetParentsFiles(pool);
    auto best = pool.idle.end();
    for (auto it = pool.idle.begin(); it != pool.idle.end(); ++it) {
      if (it->capacity() / slots >= slot_bytes &&
          (best == pool.idle.end() || it->capacity() < best->capacity())) {
        best = it;
      }
    }
    if (best != pool.idle.end()) {
      SharedPointsFile file = std::move(*best);
      pool.idle.erase(best);
      file.Reslot(slot_bytes, slots);
      return SharedPointsLease(std::move(file));
    }
  }
  absl::StatusOr<SharedPointsFile> made = SharedPointsFile::Create(slot_bytes, slots);
  if (!made.ok()) return made.status();
  return SharedPointsLease(*std::move(made));
}

SharedPointsLease::SharedPointsLease(SharedPointsFile file)
    : file_(std::move(file)), pid_(ThisProcess()) {}

SharedPointsLease::~SharedPointsLease() {
  if (!file_) return;
  if (pid_ != ThisProcess()) return;  // the file closes with file_
  SharedPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  ForgetParentsFiles(pool);
  pool.idle.push_back(*std::move(file_));
  file_.reset();
  if (static_cast<int>(pool.idle.size()) > kSharedIdleFiles) {
    pool.idle.erase(std::min_element(pool.idle.begin(), pool.idle.end(),
                                     [](const SharedPointsFile& a, const SharedPointsFile& b) {
                                       return a.capacity() < b.capacity();
                                     }));
  }
}

int IdleSharedPointsFiles() {
  SharedPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  ForgetParentsFiles(pool);
  return static_cast<int>(pool.idle.size());
}

absl::Status SharedPointsFile::Name(int slot, int64_t bytes, bool float64,
                                    v1::SharedPoints* out) const {
  if (slot < 0 || slot >= slots_ || bytes < 0 || bytes > slot_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("shared points: ", bytes, " bytes in slot ",
                                                   slot, " of ", slots_, " of ", slot_bytes_));
  }
#ifdef __linux__
  out->set_pid(static_cast<int32_t>(getpid()));
  out->set_fd(fd_);
  out->set_offset(kSharedTokenBytes + slot * slot_bytes_);
  out->set_bytes(bytes);
  out->set_token(token_);
  out->set_float64(float64);
  return absl::OkStatus();
#else
  (void)float64;
  (void)out;
  return absl::FailedPreconditionError("shared points need Linux's memfd");
#endif
}

absl::Status ReadSharedPoints(const v1::SharedPoints& shared, void* out) {
#if defined(__linux__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (shared.pid() <= 0 || shared.fd() < 0 || shared.offset() < kSharedTokenBytes ||
      shared.bytes() < 0 || shared.token().size() != kSharedTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "points_shared names pid ", shared.pid(), ", fd ", shared.fd(), ", offset ",
        shared.offset(), ", ", shared.bytes(), " bytes and a token of ", shared.token().size(),
        " bytes: needs a pid > 0, an fd >= 0, an offset past the ", kSharedTokenBytes,
        "-byte token, bytes >= 0 and the token"));
  }
  const std::string path = absl::StrCat("/proc/", shared.pid(), "/fd/", shared.fd());
  // What the descriptor is, before it is opened: a memfd of this protocol.
  char target[64] = {};
  const ssize_t length = readlink(path.c_str(), target, sizeof(target) - 1);
  if (length < 0) return Errno(absl::StrCat("points_shared: ", path));
  if (!absl::StartsWith(absl::string_view(target, static_cast<size_t>(length)),
                        absl::StrCat("/memfd:", kMemfdName, " "))) {
    return absl::FailedPreconditionError(
        absl::StrCat("points_shared: ", path, " is not a memory file of shared points"));
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno(absl::StrCat("points_shared: opening ", path));
  char token[kSharedTokenBytes];
  absl::Status status;
  if (Whole(fd, token, kSharedTokenBytes, 0) != kSharedTokenBytes ||
      std::memcmp(token, shared.token().data(), kSharedTokenBytes) != 0) {
    status = absl::FailedPreconditionError(
        absl::StrCat("points_shared: ", path, " does not hold the chunk's token"));
  } else if (Whole(fd, static_cast<char*>(out), shared.bytes(), shared.offset()) !=
             shared.bytes()) {
    status = absl::FailedPreconditionError(absl::StrCat("points_shared: ", path, " ends before ",
                                                        shared.bytes(), " bytes from offset ",
                                                        shared.offset()));
  }
  close(fd);
  return status;
#else
  (void)shared;
  (void)out;
  return absl::FailedPreconditionError(
      "points_shared: this server reads shared points only on little-endian Linux");
#endif
}

bool IsLocalPeer(absl::string_view peer) {
  return absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "ipv4:127.") ||
         absl::StartsWith(peer, "ipv6:[::1]") || absl::StartsWith(peer, "ipv6:%5B::1%5D") ||
         absl::StartsWith(peer, "ipv6:[::ffff:127.");
}

bool IsLocalTarget(absl::string_view target) {
  for (absl::string_view scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::ConsumePrefix(&target, scheme)) break;
  }
  if (absl::StartsWith(target, "unix:")) return true;
  return absl::StartsWith(target, "127.") || absl::StartsWith(target, "localhost:") ||
         target == "localhost" || absl::StartsWith(target, "[::1]");
}

}  // namespace kmt
