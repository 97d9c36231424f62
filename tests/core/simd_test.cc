// The SIMD levels: choosing one, refusing what the CPU or the binary lacks,
// and the same labels, distances, objective and cluster sums at every level
// the CPU runs, each level equal to plain Lloyd's step by step.
#include "core/simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/assign.h"
#include "core/bounds.h"
#include "core/cluster_sums.h"
#include "core/random.h"
#include "core/transformer.h"
#include "reference/lloyd.h"
#include "tests/support/gaussian_clusters.h"
#include "tests/support/simd_levels.h"

namespace kmt {
namespace {

TEST(Simd, LevelsAreCompiledSupportedAndChosen) {
  const std::vector<SimdLevel> compiled = CompiledSimdLevels();
  const std::vector<SimdLevel> supported = SupportedSimdLevels();
  ASSERT_FALSE(compiled.empty());
  ASSERT_FALSE(supported.empty());
  EXPECT_TRUE(std::is_sorted(compiled.begin(), compiled.end()));
  for (SimdLevel level : supported) {
    EXPECT_NE(std::find(compiled.begin(), compiled.end(), level), compiled.end());
  }
  // The lowest compiled level runs on every CPU of the architecture.
  EXPECT_EQ(supported.front(), compiled.front());
  ASSERT_TRUE(UseSimdLevel("auto").ok());
  EXPECT_EQ(ActiveSimdChoice(), AutoSimdChoice());
  EXPECT_NE(DescribeSimd().find("simd " + SimdChoiceName(ActiveSimdChoice()) + " (auto"),
            std::string::npos)
      << DescribeSimd();
  for (SimdLevel level : supported) {
    ASSERT_TRUE(UseSimdLevel(SimdLevelName(level)).ok());
    EXPECT_TRUE(ActiveSimdChoice() == SimdChoice::All(level));
    EXPECT_EQ(DescribeSimd().find("simd " + SimdLevelName(level) + " (set;"), 0u) << DescribeSimd();
  }
  if (std::find(supported.begin(), supported.end(), SimdLevel::kV3) != supported.end()) {
    EXPECT_TRUE(UseSimdLevel("x86-64-v3").ok());
    EXPECT_TRUE(ActiveSimdChoice() == SimdChoice::All(SimdLevel::kV3));
  }
  ASSERT_TRUE(UseSimdLevel("auto").ok());
}

// Auto takes each group from the highest level the CPU runs, or from v3
// where that is v4 and v3 was timed faster; never from below v3 on a CPU
// that has it.
TEST(Simd, AutoTakesEachGroupFromTheHighestLevelOrV3) {
  const std::vector<SimdLevel> supported = SupportedSimdLevels();
  const SimdChoice automatic = AutoSimdChoice();
  SCOPED_TRACE(DescribeSimd());
  for (SimdLevel level : {automatic.assignment, automatic.sums, automatic.attention}) {
    if (supported.back() == SimdLevel::kV4 && supported.size() > 1) {
      EXPECT_TRUE(level == SimdLevel::kV4 || level == SimdLevel::kV3) << SimdLevelName(level);
    } else {
      EXPECT_EQ(level, supported.back()) << SimdLevelName(level);
    }
  }
}

// Auto's choice is a function of the CPU: a measured CPU's from the table;
// otherwise a timing may move the assignment and the sums to v3 (their bits
// are the same at every level), never attention, whose sums follow the
// level: two processes on one CPU run learned models at the same level.
TEST(Simd, AutoTakesAttentionsLevelFromTheCpuAloneNeverFromATiming) {
  const SimdChoice v3 = SimdChoice::All(SimdLevel::kV3), v4 = SimdChoice::All(SimdLevel::kV4);
  const SimdChoice timed = AutoChoiceOf(std::nullopt, SimdLevel::kV4, v3);
  EXPECT_EQ(timed.assignment, SimdLevel::kV3);
  EXPECT_EQ(timed.sums, SimdLevel::kV3);
  EXPECT_EQ(timed.attention, SimdLevel::kV4);
  EXPECT_TRUE(AutoChoiceOf(std::nullopt, SimdLevel::kV4, std::nullopt) == v4);
  EXPECT_TRUE(AutoChoiceOf(v4, SimdLevel::kV4, v3) == v4);

  // The table: vendor and family, and AMX where the entry needs it.
  const MeasuredCpu* xeon = MeasuredChoice({"GenuineIntel", 6, 0xa7, true});
  ASSERT_NE(xeon, nullptr);
  EXPECT_STREQ(xeon->name, "Intel Xeon with AMX");
  EXPECT_EQ(xeon->filter, LowPrecisionFilter::kAmxBf16);
  EXPECT_EQ(MeasuredChoice({"GenuineIntel", 6, 0x55, false}), nullptr);  // Skylake-SP: timed
  const MeasuredCpu* zen4 = MeasuredChoice({"AuthenticAMD", 0x19, 0x11, false});
  ASSERT_NE(zen4, nullptr);
  EXPECT_EQ(zen4->filter, LowPrecisionFilter::kAvx512Bf16);
  EXPECT_EQ(MeasuredChoice({"AuthenticAMD", 0x1a, 0x02, false}), nullptr);

  // This CPU: the table's choice where it is in it (no timing), and the
  // same attention level in every process.
  const SimdChoice automatic = AutoSimdChoice();
  const CpuModel cpu = DetectCpuModel();
  SCOPED_TRACE(DescribeSimd());
  if (SupportedSimdLevels().back() != SimdLevel::kV4) return;
  EXPECT_EQ(automatic.attention, SimdLevel::kV4);
  if (const MeasuredCpu* measured = MeasuredChoice(cpu)) {
    EXPECT_TRUE(automatic == measured->choice);
    EXPECT_NE(DescribeSimd().find(std::string("cpu table: ") + measured->name), std::string::npos);
    // And the table's filter, wherever the CPU and the binary allow it.
    const std::vector<LowPrecisionFilter> allowed = CpuLowPrecisionFilters();
    if (std::find(allowed.begin(), allowed.end(), measured->filter) != allowed.end()) {
      EXPECT_EQ(CpuLowPrecisionFilter(), measured->filter);
    }
  }
}

TEST(Simd, NamesAChoiceByItsLevels) {
  EXPECT_EQ(SimdChoiceName(SimdChoice::All(SimdLevel::kV3)), "v3");
  EXPECT_EQ(SimdChoiceName({.assignment = SimdLevel::kV4,
                            .sums = SimdLevel::kV4,
                            .attention = SimdLevel::kBaseline}),
            "assignment v4, sums v4, attention x86-64");
}

TEST(Simd, RefusesALevelItCannotRunAndKeepsTheOneInUse) {
  ASSERT_TRUE(UseSimdLevel("auto").ok());
  const SimdChoice before = ActiveSimdChoice();
  const absl::Status unknown = UseSimdLevel("v9");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("'v9'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.message().find(SimdLevelName(CompiledSimdLevels().back())), std::string::npos)
      << unknown;
  EXPECT_TRUE(ActiveSimdChoice() == before);
  // A compiled level above the CPU's, where this machine has one.
  for (SimdLevel level : CompiledSimdLevels()) {
    const std::vector<SimdLevel> supported = SupportedSimdLevels();
    if (std::find(supported.begin(), supported.end(), level) != supported.end()) continue;
    const absl::Status lacking = UseSimdLevel(SimdLevelName(level));
    EXPECT_EQ(lacking.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(lacking.message().find("this CPU lacks"), std::string::npos) << lacking;
    EXPECT_NE(lacking.message().find(SimdLevelName(CpuSimdLevel())), std::string::npos) << lacking;
    EXPECT_TRUE(ActiveSimdChoice() == before);
    // One group's level is enough to refuse a choice.
    SimdChoice mixed = SimdChoice::All(supported.front());
    mixed.attention = level;
    EXPECT_EQ(UseSimdChoice(mixed).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(ActiveSimdChoice() == before);
  }
}

// What one assignment gives, for comparing levels to the bit.
template <typename Scalar>
struct Assigned {
  Labels labels;
  Vector<Scalar> sq;
  double objective = 0;
  Matrix<double> sums;
  std::vector<double> weights;
};

// The exactness problems' kind (tests/core/constructions_test.cc): random
// n, d, k, one in three on an integer grid far from the origin with exact
// and near ties, weighted or not.
template <typename Scalar>
void ExpectSameAssignmentAtEveryLevel() {
  Rng rng(2026);
  for (int trial = 0; trial < 24; ++trial) {
    const int d = 1 + static_cast<int>(rng.Below(48));
    const int k = 1 + static_cast<int>(rng.Below(80));
    const int n = k + static_cast<int>(rng.Below(6000));
    SCOPED_TRACE(testing::Message()
                 << "trial " << trial << ": n=" << n << " d=" << d << " k=" << k);
    Matrix<Scalar> points(d, n), centers(d, k);
    const bool grid = trial % 3 == 0;
    for (Eigen::Index i = 0; i < points.size(); ++i) {
      points.data()[i] = grid ? static_cast<Scalar>(1000 + rng.Below(3) + 1e-6 * rng.Uniform())
                              : static_cast<Scalar>(rng.Normal());
    }
    for (Eigen::Index j = 0; j < k; ++j) centers.col(j) = points.col(rng.Below(n));
    Vector<Scalar> weights(n);
    for (Eigen::Index i = 0; i < n; ++i) weights[i] = static_cast<Scalar>(rng.Uniform());
    const Vector<Scalar>* w = trial % 2 ? &weights : nullptr;
    const Labels plain = ReferenceLabels(points, centers);

    std::map<std::string, Assigned<Scalar>> at;
    AtEachSimdLevel([&] {
      Assigned<Scalar> a;
      ClusterSums sums(d, k);
      a.objective = AssignNearest(points, centers, &a.labels, &a.sq, &sums, w);
      a.sums = sums.sums;
      a.weights = sums.weights;
      EXPECT_EQ(a.labels, plain);
      at.emplace(SimdChoiceName(ActiveSimdChoice()), std::move(a));
    });
    const Assigned<Scalar>& first = at.begin()->second;
    for (const auto& [name, a] : at) {
      SCOPED_TRACE("level " + name + " against " + at.begin()->first);
      EXPECT_EQ(a.labels, first.labels);
      EXPECT_EQ(a.sq, first.sq);
      EXPECT_EQ(a.objective, first.objective);
      EXPECT_EQ(a.sums, first.sums);
      EXPECT_EQ(a.weights, first.weights);
    }
  }
}

TEST(Simd, OneAssignmentIsTheSameAtEveryLevel) {
  ExpectSameAssignmentAtEveryLevel<float>();
  ExpectSameAssignmentAtEveryLevel<double>();
}

// Whole runs of Lloyd's through the fast path, the products' way and the
// bounds' way: at every level, plain Lloyd's labels at every layer; across
// levels and ways, the same labels, centers and objectives to the bit.
template <typename Scalar>
void ExpectSameRunsAtEveryLevel() {
  struct Case {
    int n, d, k;
  };
  for (const Case& c : {Case{20000, 32, 40}, Case{4096, 32, 16}, Case{3000, 7, 33}}) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " d=" << c.d << " k=" << c.k);
    const Clusters<Scalar> task = GaussianClusters<Scalar>({.n = c.n, .d = c.d, .k = c.k}, 7);
    const Matrix<Scalar> init = task.points.leftCols(c.k);
    const auto reference = ReferenceLloyd(task.points, init, 8);
    std::map<std::string, RunResult<Scalar>> runs;
    AtEachSimdLevel([&] {
      for (AssignmentPath path : {AssignmentPath::kProducts, AssignmentPath::kBounds}) {
        RunOptions options{.layers = 8, .record_trajectory = true, .assignment = path};
        absl::StatusOr<RunResult<Scalar>> run =
            RunLloyd(LloydOptions{}, task.points, init, options);
        ASSERT_TRUE(run.ok()) << run.status();
        for (int t = 0; t < 8; ++t) {
          ASSERT_EQ(run->trajectory[t].labels, reference[t].labels) << "layer " << t;
        }
        runs.emplace(SimdChoiceName(ActiveSimdChoice()) +
                         (path == AssignmentPath::kBounds ? " bounds" : " products"),
                     *std::move(run));
      }
    });
    const RunResult<Scalar>& first = runs.begin()->second;
    for (const auto& [name, run] : runs) {
      SCOPED_TRACE(name + " against " + runs.begin()->first);
      EXPECT_EQ(run.labels, first.labels);
      EXPECT_EQ(run.centers, first.centers);
      EXPECT_EQ(run.layer_objectives, first.layer_objectives);
      for (int t = 0; t < 8; ++t) EXPECT_EQ(run.trajectory[t].centers, first.trajectory[t].centers);
    }
  }
}

TEST(Simd, LloydRunsAreTheSameAtEveryLevelAndWay) {
  ExpectSameRunsAtEveryLevel<float>();
  ExpectSameRunsAtEveryLevel<double>();
}

}  // namespace
}  // namespace kmt
