#include "proto/shared_points.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#ifdef __linux__
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace kmt {
namespace {

#ifdef __linux__
// What a client writes into a slot, the server reads back from its process
// and descriptor, byte for byte; each slot on its own, written again.
TEST(SharedPoints, TheServerReadsWhatTheClientWrote) {
  absl::StatusOr<SharedPointsFile> file = SharedPointsFile::Create(64, 3);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->slots(), 3);
  EXPECT_EQ(file->slot_bytes(), 64);
  std::vector<v1::SharedPoints> named(3);
  std::vector<std::vector<float>> values(3);
  for (int slot = 0; slot < 3; ++slot) {
    values[slot] = std::vector<float>(16, 0.5f + slot);
    values[slot][3] = -1.0f / (slot + 3);
    std::memcpy(file->slot(slot), values[slot].data(), 64);
    ASSERT_TRUE(file->Name(slot, 64, slot == 1, &named[slot]).ok());
    EXPECT_EQ(named[slot].pid(), getpid());
    EXPECT_EQ(named[slot].offset(), kSharedTokenBytes + 64 * slot);
    EXPECT_EQ(named[slot].bytes(), 64);
    EXPECT_EQ(named[slot].float64(), slot == 1);
    EXPECT_EQ(named[slot].token().size(), kSharedTokenBytes);
  }
  for (int slot = 0; slot < 3; ++slot) {
    std::vector<float> read(16);
    ASSERT_TRUE(ReadSharedPoints(named[slot], read.data()).ok());
    EXPECT_EQ(read, values[slot]);
  }
  // A slot written again holds the new values; a shorter write names fewer.
  const std::vector<float> again(4, 7.0f);
  std::memcpy(file->slot(0), again.data(), 16);
  ASSERT_TRUE(file->Name(0, 16, false, &named[0]).ok());
  std::vector<float> read(4);
  ASSERT_TRUE(ReadSharedPoints(named[0], read.data()).ok());
  EXPECT_EQ(read, again);
  // Two files' tokens differ: neither names the other's.
  absl::StatusOr<SharedPointsFile> other = SharedPointsFile::Create(64, 1);
  ASSERT_TRUE(other.ok());
  v1::SharedPoints theirs;
  ASSERT_TRUE(other->Name(0, 64, false, &theirs).ok());
  EXPECT_NE(theirs.token(), named[0].token());
  theirs.set_fd(named[0].fd());
  EXPECT_EQ(ReadSharedPoints(theirs, read.data()).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SharedPoints, ANameBeyondItsSlotIsRefused) {
  absl::StatusOr<SharedPointsFile> file = SharedPointsFile::Create(8, 2);
  ASSERT_TRUE(file.ok());
  v1::SharedPoints named;
  EXPECT_EQ(file->Name(0, 12, false, &named).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file->Name(2, 8, false, &named).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file->Name(-1, 8, false, &named).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file->Name(0, -1, false, &named).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(SharedPointsFile::Create(0, 1).ok());
  EXPECT_FALSE(SharedPointsFile::Create(8, 0).ok());
}

// The pool lends a file, takes it back and lends it again, divided into
// the slots asked for, while a second lease at once gets another file; it
// keeps at most kSharedIdleFiles, and a file too small for a request is
// left idle while a new one is made.
TEST(SharedPointsPool, LendsTheSameFileAgainAndAnotherAtOnce) {
  int64_t first_inode = -1;
  {
    absl::StatusOr<SharedPointsLease> lease = TakeSharedPointsFile(1 << 16, 4);
    ASSERT_TRUE(lease.ok()) << lease.status();
    first_inode = (*lease)->inode();
    EXPECT_GE(first_inode, 0);
    EXPECT_EQ((*lease)->slots(), 4);
    EXPECT_EQ((*lease)->slot_bytes(), 1 << 16);
  }
  const int idle = IdleSharedPointsFiles();
  EXPECT_GE(idle, 1);
  {
    // Smaller slots fit the same file; its points round trip as before.
    absl::StatusOr<SharedPointsLease> again = TakeSharedPointsFile(1 << 15, 2);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)->inode(), first_inode);
    EXPECT_EQ(IdleSharedPointsFiles(), idle - 1);
    EXPECT_EQ((*again)->slots(), 2);
    EXPECT_EQ((*again)->slot_bytes(), 1 << 15);
    const std::vector<float> values(8, 3.25f);
    std::memcpy((*again)->slot(1), values.data(), 32);
    v1::SharedPoints named;
    ASSERT_TRUE((*again)->Name(1, 32, false, &named).ok());
    EXPECT_EQ(named.offset(), kSharedTokenBytes + (1 << 15));
    std::vector<float> read(8);
    ASSERT_TRUE(ReadSharedPoints(named, read.data()).ok());
    EXPECT_EQ(read, values);
    EXPECT_FALSE((*again)->Name(2, 32, false, &named).ok());
    // At once: another file.
    absl::StatusOr<SharedPointsLease> other = TakeSharedPointsFile(1 << 15, 2);
    ASSERT_TRUE(other.ok());
    EXPECT_NE((*other)->inode(), first_inode);
    // Larger than any idle file: a new one.
    absl::StatusOr<SharedPointsLease> large = TakeSharedPointsFile(1 << 20, 4);
    ASSERT_TRUE(large.ok());
    EXPECT_NE((*large)->inode(), first_inode);
    EXPECT_NE((*large)->inode(), (*other)->inode());
  }
  EXPECT_LE(IdleSharedPointsFiles(), kSharedIdleFiles);
  // More leases at once than the pool keeps: it keeps kSharedIdleFiles.
  {
    std::vector<SharedPointsLease> many;
    for (int i = 0; i < kSharedIdleFiles + 2; ++i) {
      absl::StatusOr<SharedPointsLease> lease = TakeSharedPointsFile(4096, 1);
      ASSERT_TRUE(lease.ok());
      many.push_back(*std::move(lease));
    }
  }
  EXPECT_EQ(IdleSharedPointsFiles(), kSharedIdleFiles);
  EXPECT_FALSE(TakeSharedPointsFile(0, 1).ok());
  EXPECT_FALSE(TakeSharedPointsFile(8, 0).ok());
}

// A forked child never writes its parent's files: its pool starts empty,
// and what it takes is a file of its own.
TEST(SharedPointsPool, AForkedChildMakesItsOwnFiles) {
  {
    absl::StatusOr<SharedPointsLease> idle = TakeSharedPointsFile(4096, 1);
    ASSERT_TRUE(idle.ok());
  }
  ASSERT_GE(IdleSharedPointsFiles(), 1);
  absl::StatusOr<SharedPointsLease> held = TakeSharedPointsFile(4096, 1);
  ASSERT_TRUE(held.ok());
  const int64_t parents = (*held)->inode();
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // In the child: '1' if its pool forgot the parent's idle files and lent
    // a new one, and its copy of the parent's lease, ending, was not given
    // to its pool.
    const bool empty = IdleSharedPointsFiles() == 0;
    bool lent_own = false;
    {
      absl::StatusOr<SharedPointsLease> lease = TakeSharedPointsFile(4096, 1);
      lent_own = lease.ok() && (*lease)->inode() != parents;
    }
    const int kept = IdleSharedPointsFiles();  // the child's own file
    { SharedPointsLease copy = *std::move(held); }
    const bool parents_kept = IdleSharedPointsFiles() != kept;
    const char verdict = empty && lent_own && kept == 1 && !parents_kept ? '1' : '0';
    _exit(write(pipe_fds[1], &verdict, 1) == 1 ? 0 : 1);
  }
  close(pipe_fds[1]);
  char verdict = 0;
  EXPECT_EQ(read(pipe_fds[0], &verdict, 1), 1);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(verdict, '1');
  // The child's closing its copies left the parent's file open.
  const std::vector<float> values(4, -2.5f);
  std::memcpy((*held)->slot(0), values.data(), 16);
  v1::SharedPoints named;
  ASSERT_TRUE((*held)->Name(0, 16, false, &named).ok());
  std::vector<float> read_back(4);
  ASSERT_TRUE(ReadSharedPoints(named, read_back.data()).ok());
  EXPECT_EQ(read_back, values);
}

// Descriptors that are not a memory file of shared points are refused by
// what they are, before anything is read: a regular file whose first bytes
// are the token, and a memfd of another name holding it.
TEST(SharedPoints, OnlyAMemoryFileOfSharedPointsIsRead) {
  absl::StatusOr<SharedPointsFile> file = SharedPointsFile::Create(16, 1);
  ASSERT_TRUE(file.ok());
  v1::SharedPoints named;
  ASSERT_TRUE(file->Name(0, 16, false, &named).ok());
  std::vector<char> copy(kSharedTokenBytes + 16);
  std::copy(named.token().begin(), named.token().end(), copy.begin());

  std::FILE* regular = std::tmpfile();
  ASSERT_NE(regular, nullptr);
  ASSERT_EQ(pwrite(fileno(regular), copy.data(), copy.size(), 0),
            static_cast<ssize_t>(copy.size()));
  const int memfd = memfd_create("other", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(pwrite(memfd, copy.data(), copy.size(), 0), static_cast<ssize_t>(copy.size()));
  for (int fd : {fileno(regular), memfd}) {
    v1::SharedPoints elsewhere = named;
    elsewhere.set_fd(fd);
    std::vector<float> read(4);
    const absl::Status status = ReadSharedPoints(elsewhere, read.data());
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(status.message().find("not a memory file of shared points"), std::string::npos)
        << status;
  }
  close(memfd);
  std::fclose(regular);
}

// A client that shrinks its file under the server gives it a short read,
// FAILED_PRECONDITION, never a fault; a closed file cannot be opened.
TEST(SharedPoints, AFileShrunkOrClosedIsAFailedPrecondition) {
  absl::StatusOr<SharedPointsFile> file = SharedPointsFile::Create(4096, 1);
  ASSERT_TRUE(file.ok());
  v1::SharedPoints named;
  ASSERT_TRUE(file->Name(0, 4096, false, &named).ok());
  ASSERT_EQ(ftruncate(named.fd(), kSharedTokenBytes + 100), 0);
  std::vector<float> read(1024);
  absl::Status status = ReadSharedPoints(named, read.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("ends before 4096 bytes"), std::string::npos) << status;
  *file = std::move(*SharedPointsFile::Create(8, 1));  // the first one closed
  status = ReadSharedPoints(named, read.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
}

TEST(SharedPoints, MalformedNamesAreInvalid) {
  v1::SharedPoints named;
  named.set_pid(getpid());
  named.set_fd(0);
  named.set_offset(kSharedTokenBytes);
  named.set_bytes(4);
  named.set_token(std::string(kSharedTokenBytes, 'x'));
  float out = 0;
  for (auto change : std::vector<void (*)(v1::SharedPoints*)>{
           [](v1::SharedPoints* s) { s->set_pid(0); },
           [](v1::SharedPoints* s) { s->set_fd(-1); },
           [](v1::SharedPoints* s) { s->set_offset(kSharedTokenBytes - 1); },
           [](v1::SharedPoints* s) { s->set_bytes(-4); },
           [](v1::SharedPoints* s) { s->set_token("short"); },
       }) {
    v1::SharedPoints bad = named;
    change(&bad);
    EXPECT_EQ(ReadSharedPoints(bad, &out).code(), absl::StatusCode::kInvalidArgument);
  }
}
#endif

TEST(SharedPoints, KnowsThisMachinesPeersAndTargets) {
  for (const char* peer : {"ipv4:127.0.0.1:5000", "ipv4:127.1.2.3:1", "ipv6:[::1]:5000",
                           "ipv6:%5B::1%5D:5000", "ipv6:[::ffff:127.0.0.1]:5000", "unix:/tmp/s"}) {
    EXPECT_TRUE(IsLocalPeer(peer)) << peer;
  }
  for (const char* peer :
       {"ipv4:10.0.0.1:5000", "ipv4:128.0.0.1:1", "ipv6:[2001:db8::1]:5000", "ipv6:[::10]:1", ""}) {
    EXPECT_FALSE(IsLocalPeer(peer)) << peer;
  }
  for (const char* target : {"127.0.0.1:50051", "localhost:50051", "localhost", "[::1]:50051",
                             "dns:///localhost:50051", "ipv4:127.0.0.1:1", "unix:/tmp/s"}) {
    EXPECT_TRUE(IsLocalTarget(target)) << target;
  }
  for (const char* target :
       {"10.0.0.1:50051", "kmt.example:50051", "localhost.example:1", "[2001:db8::1]:1", ""}) {
    EXPECT_FALSE(IsLocalTarget(target)) << target;
  }
}

}  // namespace
}  // namespace kmt
