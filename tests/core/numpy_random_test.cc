// NumpyRandomState against numbers numpy 1.24's legacy RandomState gives
// (printed by numpy, written here): seeding, randint's masked rejection
// over 32 and 64 bits, choice without replacement, and a state carried
// over from get_state().
#include "core/numpy_random.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kmt {
namespace {

using ::std::vector;

TEST(NumpyRandomState, SeededStreamIsStdMt19937s) {
  NumpyRandomState numpy(12345);
  std::mt19937 standard(12345);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(numpy.NextUint32(), standard()) << i;
}

TEST(NumpyRandomState, RandIntAndChoiceAsNumpyDraws) {
  // RandomState(5): randint(0, 100000, 8); choice(4096, replace=False,
  // size=5); randint(0, 2**40, 3); randint(0, 1, 3); randint(0, 7, 4).
  NumpyRandomState r(5);
  EXPECT_EQ(r.RandInt(0, 100000, 8),
            (vector<int64_t>{35683, 18638, 20463, 5520, 59465, 33800, 33508, 81639}));
  EXPECT_EQ(r.ChoiceWithoutReplacement(4096, 5), (vector<int64_t>{1288, 428, 1517, 2756, 2307}));
  EXPECT_EQ(r.RandInt(0, int64_t{1} << 40, 3),
            (vector<int64_t>{251610375569, 387029450423, 961826784434}));
  EXPECT_EQ(r.RandInt(0, 1, 3), (vector<int64_t>{0, 0, 0}));  // draws nothing
  EXPECT_EQ(r.RandInt(0, 7, 4), (vector<int64_t>{5, 0, 6, 5}));
  EXPECT_EQ(r.pos(), 65);
}

TEST(NumpyRandomState, StreamCarriesOverTwists) {
  // RandomState(7): randint(0, 200000, 700) (past one twist), then
  // randint(0, 3, 6) and choice(10, replace=False, size=10).
  NumpyRandomState r(7);
  const vector<int64_t> batch = r.RandInt(0, 200000, 700);
  EXPECT_EQ(vector<int64_t>(batch.begin(), batch.begin() + 4),
            (vector<int64_t>{61615, 189636, 49689, 10742}));
  EXPECT_EQ(vector<int64_t>(batch.end() - 4, batch.end()),
            (vector<int64_t>{152316, 181607, 113602, 78877}));
  EXPECT_EQ(r.pos(), 289);
  // A state handed over as get_state() gives it continues the stream.
  absl::StatusOr<NumpyRandomState> copy =
      NumpyRandomState::FromState(vector<uint32_t>(r.key().begin(), r.key().end()), r.pos());
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->RandInt(0, 3, 6), (vector<int64_t>{1, 1, 0, 0, 1, 2}));
  EXPECT_EQ(copy->ChoiceWithoutReplacement(10, 10),
            (vector<int64_t>{7, 1, 8, 2, 0, 9, 3, 6, 5, 4}));
  EXPECT_EQ(copy->pos(), 311);
}

TEST(NumpyRandomState, FullRangesAndNegativeLows) {
  // RandomState(7): randint(0, 2**32, 3), randint(-5, 5, 3).
  NumpyRandomState r(7);
  EXPECT_EQ(r.RandInt(0, int64_t{1} << 32, 3), (vector<int64_t>{327741615, 976413892, 3349725721}));
  EXPECT_EQ(r.RandInt(-5, 5, 3), (vector<int64_t>{1, -2, -2}));
}

TEST(NumpyRandomState, RefusesAStateOfTheWrongShape) {
  absl::StatusOr<NumpyRandomState> short_key = NumpyRandomState::FromState(vector<uint32_t>(5), 0);
  EXPECT_EQ(short_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(short_key.status().message(),
            "an MT19937 state of 5 words at position 0: expected 624 words and a position in "
            "[0, 624]");
  EXPECT_FALSE(NumpyRandomState::FromState(vector<uint32_t>(624), 625).ok());
}

}  // namespace
}  // namespace kmt
