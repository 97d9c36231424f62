#include "proto/shared_points.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#ifdef __linux__
#include <fcntl.h>
#include <sys/mman.h>
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
