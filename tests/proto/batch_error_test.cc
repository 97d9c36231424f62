// A status through the BatchError of a response and back, as the server
// writes it and a client reads it.
#include "proto/batch_error.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "proto/utf8.h"

namespace kmt {
namespace {

TEST(BatchError, EveryCanonicalCodeGoesThereAndBack) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code), "n = 3, expected 4");
    SCOPED_TRACE(status.ToString());
    const v1::BatchError error = ToBatchError(status);
    EXPECT_EQ(error.code(), code);
    EXPECT_EQ(error.message(), "n = 3, expected 4");
    EXPECT_EQ(FromBatchError(error), status);
  }
}

TEST(BatchError, OkIsTheUnsetError) {
  const v1::BatchError error = ToBatchError(absl::OkStatus());
  EXPECT_EQ(error.code(), 0);
  EXPECT_TRUE(error.message().empty());
  EXPECT_TRUE(FromBatchError(v1::BatchError()).ok());
  v1::ClusterResponse answered;
  EXPECT_FALSE(answered.has_error());
  EXPECT_TRUE(FromBatchError(answered.error()).ok());
}

TEST(BatchError, CodesTheContractDoesNotDefineReadAsUnknown) {
  v1::BatchError error;
  error.set_code(99);
  error.set_message("from a newer server");
  const absl::Status status = FromBatchError(error);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(status.message(), "from a newer server");
}

TEST(BatchError, LongMessagesAreCutAndSaySo) {
  const std::string exact(kMaxStatusMessageBytes, 'x');
  EXPECT_EQ(ToBatchError(absl::NotFoundError(exact)).message(), exact);
  const v1::BatchError cut = ToBatchError(absl::NotFoundError(exact + "y"));
  EXPECT_EQ(cut.message().size(), kMaxStatusMessageBytes);
  EXPECT_EQ(cut.message(),
            std::string(kMaxStatusMessageBytes - std::string(kTruncationMark).size(), 'x') +
                kTruncationMark);
  EXPECT_EQ(cut.code(), static_cast<int>(absl::StatusCode::kNotFound));
}

// A cut inside a character, or a message holding bytes that are not UTF-8
// (a file name), would make the client refuse the whole response.
TEST(BatchError, MessagesStayUtf8WhenCutOrGivenOtherBytes) {
  // "é" is two bytes: the cut falls inside one wherever it falls.
  std::string accents;
  while (accents.size() < 2 * kMaxStatusMessageBytes) accents += "\xC3\xA9";
  for (const std::string& message : {"x" + accents, accents}) {
    const std::string cut = ToBatchError(absl::NotFoundError(message)).message();
    EXPECT_TRUE(IsUtf8(cut));
    EXPECT_LE(cut.size(), kMaxStatusMessageBytes);
    EXPECT_TRUE(absl::EndsWith(cut, kTruncationMark));
  }
  const v1::BatchError latin1 = ToBatchError(absl::NotFoundError("caf\xE9.kmt"));
  EXPECT_EQ(latin1.message(), "caf\\xe9.kmt");
  EXPECT_EQ(ToBatchError(absl::NotFoundError("caf\xC3\xA9")).message(), "caf\xC3\xA9");
}

TEST(BatchError, ARetryPushbackGoesThereAndBackAndIsUnsetWithoutOne) {
  for (const int64_t ms : {int64_t{0}, int64_t{250}, int64_t{-1}}) {
    SCOPED_TRACE(ms);
    const absl::Status status = WithRetryPushback(absl::ResourceExhaustedError("full"), ms);
    const v1::BatchError error = ToBatchError(status);
    ASSERT_TRUE(error.has_retry_pushback_ms());
    EXPECT_EQ(error.retry_pushback_ms(), ms);
    EXPECT_EQ(RetryPushbackMs(FromBatchError(error)), ms);
  }
  const v1::BatchError none = ToBatchError(absl::ResourceExhaustedError("full"));
  EXPECT_FALSE(none.has_retry_pushback_ms());
  EXPECT_EQ(RetryPushbackMs(FromBatchError(none)), std::nullopt);
}

TEST(BatchError, APointIsNamedAnewByWhereItComesFrom) {
  const auto row = [](int64_t i) { return "row " + std::to_string(4096 + i); };
  EXPECT_EQ(RenamePoint("point 904 has NaN in dimension 2", row),
            "row 5000 has NaN in dimension 2");
  EXPECT_EQ(RenamePoint("shard 1: point 3 has Inf in dimension 0", row),
            "shard 1: row 4099 has Inf in dimension 0");
  EXPECT_EQ(RenamePoint("k = 0, must be at least 1", row), "");
}

}  // namespace
}  // namespace kmt
