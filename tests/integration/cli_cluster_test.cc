// `kmt cluster` and `kmt models` on files as users have them, against a real
// server: a file of several batches is one clustering, a short last batch
// joins the one before, labels keep one line per input row when a batch
// fails, text is read whatever its line endings and name, outputs read back
// as inputs, flags that cannot apply and unwritable outputs are refused
// before any work, scikit-learn's names are taken, and SVMlight files are
// clustered sparse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "core/init.h"
#include "core/narrow_float.h"
#include "core/transformer.h"
#include "io/npy.h"
#include "tests/integration/server_process.h"
#include "tests/integration/service_fixture.h"
#include "tests/support/sparse_documents.h"

namespace kmt {
namespace {

class CliClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = ServerProcess::Start({"--workers=2"}).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(absl::Seconds(30)), 0);
    delete server_;
  }
  void SetUp() override {
    dir_ = TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  struct Run {
    int code;
    std::string out, err;
  };
  // kmt cluster against the suite's server.
  Run Cluster(std::vector<std::string> flags) {
    flags.insert(flags.begin(), {CliBinary(), "cluster", "--server=" + server_->address()});
    Run run;
    run.code = RunProgram(flags, &run.out, &run.err);
    return run;
  }
  // The first n points of the dataset as a float32 .npy, with `nan_row`'s
  // first value NaN if it is not negative.
  std::string Npy(const std::string& name, int n, int nan_row = -1) {
    Matrix<float> points = HundredThousand().points.leftCols(n);
    if (nan_row >= 0) points(0, nan_row) = std::nanf("");
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(
        WriteNpy(path, "<f4", {n, points.rows()}, points.data(), points.size() * sizeof(float))
            .ok());
    return path;
  }

  std::string dir_;
  static ServerProcess* server_;
};
ServerProcess* CliClusterTest::server_ = nullptr;

TEST_F(CliClusterTest, AFileOfSeveralBatchesIsOneClustering) {
  const Dataset& data = HundredThousand();
  const Matrix<float> init = *InitialCenters(data.points, 6, InitMethod::kKMeansPlusPlus, 3);
  WriteCsv(dir_ + "/init.csv", init);
  // No --mode: 100,000 points are 25 batches, clustered as one dataset.
  const Run run = Cluster({"--input=" + data.csv, "--k=6", "--iterations=10", "--tol=0",
                           "--centers_in=" + dir_ + "/init.csv", "--labels_out=" + dir_ + "/l",
                           "--centers_out=" + dir_ + "/c.csv"});
  ASSERT_EQ(run.code, 0) << run.err;
  const RunResult<float> want = *RunLloyd<float>({}, data.points, init, {.layers = 10});
  EXPECT_EQ(ReadLabels(dir_ + "/l"), want.labels);
  EXPECT_EQ(ReadCsv(dir_ + "/c.csv").size(), 6u);
  EXPECT_NE(run.out.find("final objective"), std::string::npos) << run.out;
  // The job ended as the client intended: counted OK, not CANCELLED.
  const std::string metrics = MetricsText(server_->metrics_port());
  EXPECT_NE(metrics.find("kmt_jobs_total{code=\"CANCELLED\"} 0"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("kmt_jobs_total{code=\"OK\"} 0"), std::string::npos) << metrics;
  // Per-batch mode is asked for, and its summary says what it did.
  const Run batches = Cluster({"--mode=per-batch", "--input=" + data.csv, "--k=6"});
  ASSERT_EQ(batches.code, 0) << batches.err;
  EXPECT_NE(batches.out.find("25 batches, 100000 points, 0 failed"), std::string::npos)
      << batches.out;
  EXPECT_NE(batches.out.find("every batch clustered on its own"), std::string::npos) << batches.out;
  // Whole mode stops by scikit-learn's defaults unless told otherwise.
  const Run defaults = Cluster({"--input=" + data.csv, "--k=6"});
  ASSERT_EQ(defaults.code, 0) << defaults.err;
  EXPECT_NE(defaults.out.find("(converged: "), std::string::npos) << defaults.out;
}

TEST_F(CliClusterTest, AShortLastBatchJoinsTheOneBefore) {
  const std::string input = Npy("short.npy", 4100);
  for (const char* mode : {"--mode=per-batch", "--mode=auto"}) {
    SCOPED_TRACE(mode);
    const Run run = Cluster({mode, "--input=" + input, "--k=10", "--labels_out=" + dir_ + "/l"});
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_EQ(ReadLabels(dir_ + "/l").size(), 4100u);
  }
  const Run run = Cluster({"--mode=per-batch", "--input=" + input, "--k=10"});
  EXPECT_NE(run.out.find("1 batch, 4100 points, 0 failed"), std::string::npos) << run.out;
}

TEST_F(CliClusterTest, LabelsKeepOneLinePerRowWhenABatchFails) {
  const std::string input = Npy("nan.npy", 10000, 5000);
  for (const std::string labels : {"l.txt", "l.npy"}) {
    SCOPED_TRACE(labels);
    const Run run = Cluster(
        {"--mode=per-batch", "--input=" + input, "--k=6", "--labels_out=" + dir_ + "/" + labels});
    EXPECT_EQ(run.code, 1);
    EXPECT_NE(run.err.find("row 5000 of " + input + " (point 904 of batch 1) has NaN"),
              std::string::npos)
        << run.err;
    const std::vector<int> got =
        labels == "l.txt" ? ReadLabels(dir_ + "/" + labels) : ReadNpy<int>(dir_ + "/" + labels);
    ASSERT_EQ(got.size(), 10000u);
    for (int i = 0; i < 10000; ++i) {
      if (i >= 4096 && i < 8192) {
        ASSERT_EQ(got[i], -1) << "row " << i;
      } else {
        ASSERT_GE(got[i], 0) << "row " << i;
        ASSERT_LT(got[i], 6) << "row " << i;
      }
    }
  }
  // Whole mode names the row too, resident (on two shards) or by passes,
  // and writes no labels.
  for (const char* resident : {"--resident=true", "--resident=false"}) {
    SCOPED_TRACE(resident);
    const Run whole = Cluster({"--mode=whole", resident, "--streams=2", "--input=" + input, "--k=6",
                               "--labels_out=" + dir_ + "/whole.txt"});
    EXPECT_EQ(whole.code, 1);
    EXPECT_NE(whole.err.find("row 5000 of " + input), std::string::npos) << whole.err;
    EXPECT_FALSE(std::ifstream(dir_ + "/whole.txt").good());
  }
  // By passes, no shard holds points to relocate into an empty cluster:
  // refused before any pass, saying what to do.
  const Run relocate = Cluster({"--mode=whole", "--resident=false", "--input=" + input, "--k=6",
                                "--empty_clusters=relocate-farthest"});
  EXPECT_EQ(relocate.code, 1);
  EXPECT_NE(relocate.err.find("--empty_clusters=relocate-farthest needs resident shards"),
            std::string::npos)
      << relocate.err;
}

TEST_F(CliClusterTest, TextIsReadWhateverItsLineEndingsAndName) {
  std::ifstream in(HundredThousand().csv);
  const std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string head = csv.substr(0, csv.find('\n', csv.size() / 50) + 1);  // ~2,000 rows
  const size_t rows = std::count(head.begin(), head.end(), '\n');
  for (const char* name : {"crlf.csv", "p.txt", "P.CSV", "points"}) {
    SCOPED_TRACE(name);
    std::ofstream(dir_ + "/" + name, std::ios::binary)
        << (name == std::string("crlf.csv") ? absl::StrReplaceAll(head, {{"\n", "\r\n"}}) : head);
    const Run run =
        Cluster({"--input=" + dir_ + "/" + name, "--k=4", "--d=8", "--labels_out=" + dir_ + "/l"});
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_EQ(ReadLabels(dir_ + "/l").size(), rows);
  }
  // Bytes that are neither text nor NumPy's, without --d: the message names
  // --format.
  const float values[] = {1.5f, 2.5f};
  std::ofstream(dir_ + "/raw", std::ios::binary)
      .write(reinterpret_cast<const char*>(values), sizeof(values));
  const Run raw = Cluster({"--input=" + dir_ + "/raw", "--k=1"});
  EXPECT_EQ(raw.code, 1);
  EXPECT_NE(raw.err.find("--format=csv, npy or f32"), std::string::npos) << raw.err;
}

TEST_F(CliClusterTest, OutputsReadBackAsInputs) {
  const std::string input = Npy("p.npy", 3000);
  // Per-batch, .npy names get .npy files: labels (n,), centers (batches * k, d).
  const Run npy = Cluster({"--mode=per-batch", "--input=" + input, "--k=3",
                           "--labels_out=" + dir_ + "/l.npy", "--centers_out=" + dir_ + "/c.npy"});
  ASSERT_EQ(npy.code, 0) << npy.err;
  EXPECT_EQ(ReadNpy<int>(dir_ + "/l.npy").size(), 3000u);
  EXPECT_EQ(ReadNpy<float>(dir_ + "/c.npy").size(), 3u * 8);
  // Either centers file is taken back by --centers_in, which implies given
  // centers: zero iterations from them give back the same centers.
  for (const char* centers : {"c.npy", "c.csv"}) {
    SCOPED_TRACE(centers);
    if (centers == std::string("c.csv")) {
      ASSERT_EQ(Cluster({"--mode=per-batch", "--input=" + input, "--k=3",
                         "--centers_out=" + dir_ + "/c.csv"})
                    .code,
                0);
    }
    const Run again =
        Cluster({"--mode=per-batch", "--input=" + input, "--k=3", "--iterations=0",
                 "--centers_in=" + dir_ + "/" + centers, "--centers_out=" + dir_ + "/again.npy"});
    ASSERT_EQ(again.code, 0) << again.err;
    EXPECT_EQ(ReadNpy<float>(dir_ + "/again.npy"), ReadNpy<float>(dir_ + "/c.npy"));
  }
  // The per-batch centers of several batches are not one set.
  ASSERT_EQ(Cluster({"--mode=per-batch", "--input=" + input, "--k=3", "--batch_size=1500",
                     "--centers_out=" + dir_ + "/two.csv"})
                .code,
            0);
  const Run two = Cluster({"--input=" + input, "--k=3", "--centers_in=" + dir_ + "/two.csv"});
  EXPECT_EQ(two.code, 1);
  EXPECT_NE(two.err.find("more than one batch"), std::string::npos) << two.err;
}

TEST_F(CliClusterTest, FlagsThatCannotApplyAndBadOutputsAreRefusedBeforeAnyWork) {
  const std::string input = Npy("p.npy", 3000);
  const std::string big = HundredThousand().csv;
  const struct {
    std::vector<std::string> flags;
    std::string says;
  } cases[] = {
      {{"--input=" + input, "--k=3", "--tol=1e-3"}, "--tol applies to whole mode only"},
      {{"--input=" + input, "--k=3", "--mode=per-batch", "--weights_in=w.txt"},
       "--weights_in applies to whole mode only"},
      {{"--input=" + input, "--k=3", "--init=random", "--centers_in=" + input},
       "--centers_in gives the initial centers, and --init=random would choose others"},
      {{"--input=" + input, "--k=3", "--init=given"}, "--init=given needs --centers_in"},
      {{"--input=" + input, "--k=3", "--init=forgy"},
       "expected kmeans++ (or k-means++), plain-kmeans++, random, two-level, given (with "
       "--centers_in) or, in whole mode, kmeans|| (or k-means||)"},
      {{"--input=" + big, "--k=10", "--model=learned-onehot-d32-k10"}, "--mode=per-batch"},
      {{"--input=" + big, "--k=3", "--mode=whole", "--parameters=beta=2"},
       "--parameters applies to one batch at a time"},
      {{"--input=" + big, "--k=3", "--labels_out=/nonexistent/dir/l.npy"},
       "INVALID_ARGUMENT: cannot write --labels_out=/nonexistent/dir/l.npy: No such file or "
       "directory"},
      {{"--input=" + input, "--k=3", "--mode=sharded"}, "expected auto, whole or per-batch"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.says);
    const Run run = Cluster(c.flags);
    EXPECT_EQ(run.code, 1);
    EXPECT_NE(run.err.find(c.says), std::string::npos) << run.err;
    EXPECT_EQ(run.out, "");  // nothing was clustered
  }
}

TEST_F(CliClusterTest, ScikitLearnsInitNamesAreTaken) {
  const std::string input = Npy("p.npy", 3000);
  const Run spelled = Cluster(
      {"--input=" + input, "--k=3", "--init=k-means++", "--seed=4", "--labels_out=" + dir_ + "/a"});
  ASSERT_EQ(spelled.code, 0) << spelled.err;
  const Run ours = Cluster(
      {"--input=" + input, "--k=3", "--init=kmeans++", "--seed=4", "--labels_out=" + dir_ + "/b"});
  ASSERT_EQ(ours.code, 0) << ours.err;
  EXPECT_EQ(ReadLabels(dir_ + "/a"), ReadLabels(dir_ + "/b"));
  const Run parallel =
      Cluster({"--input=" + HundredThousand().csv, "--k=3", "--init=k-means||", "--iterations=2"});
  EXPECT_EQ(parallel.code, 0) << parallel.err;
  EXPECT_NE(parallel.out.find("k-means||: "), std::string::npos) << parallel.out;
}

TEST_F(CliClusterTest, TwoLevelIsTheCoresInOneBatchAndOnResidentShards) {
  const Dataset& data = HundredThousand();
  // One batch: the server's two-level, then Lloyd's.
  const Matrix<float> few = data.points.leftCols(3000);
  const Run batch = Cluster({"--input=" + Npy("p.npy", 3000), "--k=40", "--init=two-level",
                             "--seed=4", "--iterations=5", "--labels_out=" + dir_ + "/a"});
  ASSERT_EQ(batch.code, 0) << batch.err;
  EXPECT_EQ(
      ReadLabels(dir_ + "/a"),
      RunLloyd<float>({}, few, *InitialCenters(few, 40, InitMethod::kTwoLevel, 4), {.layers = 5})
          ->labels);
  // Resident shards have no two-level step: the server's two-level on a
  // sample (here every point, in order), then the job's Lloyd's.
  const Run whole =
      Cluster({"--input=" + data.csv, "--k=300", "--init=two-level", "--seed=5", "--iterations=3",
               "--tol=0", "--sample_size=100000", "--labels_out=" + dir_ + "/b"});
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_NE(whole.out.find("resident: "), std::string::npos) << whole.out;
  EXPECT_EQ(
      ReadLabels(dir_ + "/b"),
      RunLloyd<float>({}, data.points, *InitialCenters(data.points, 300, InitMethod::kTwoLevel, 5),
                      {.layers = 3})
          ->labels);
}

TEST_F(CliClusterTest, ATrainingSampleIteratesOnASampleAndLabelsEveryPoint) {
  // 100,000 points, at most 500 per center of 6: the job trains on a
  // reservoir sample of 3,000 points, then labels every point by the
  // sample's centers, exactly.
  const Dataset& data = HundredThousand();
  const Run run = Cluster({"--input=" + data.csv, "--k=6", "--iterations=5", "--tol=0",
                           "--max_points_per_center=500", "--labels_out=" + dir_ + "/l",
                           "--centers_out=" + dir_ + "/c.npy"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("training on a sample of 3000 of the 100000 points"), std::string::npos)
      << run.err;
  const std::vector<float> values = ReadNpy<float>(dir_ + "/c.npy");
  ASSERT_EQ(values.size(), 6u * 8);
  const Matrix<float> centers = Eigen::Map<const Matrix<float>>(values.data(), 8, 6);
  const RunResult<float> want = *RunLloyd<float>({}, data.points, centers, {.layers = 0});
  EXPECT_EQ(ReadLabels(dir_ + "/l"), want.labels);
  // The objective over every point, after the sample's iterations.
  const size_t at = run.out.find("final objective ");
  ASSERT_NE(at, std::string::npos) << run.out;
  EXPECT_NEAR(std::stod(run.out.substr(at + 16)), want.objective, 1e-9 * want.objective);
  // Per batch, and with one pass per iteration, every point trains.
  EXPECT_NE(
      Cluster({"--input=" + data.csv, "--k=6", "--mode=per-batch", "--max_points_per_center=500"})
          .err.find("--max_points_per_center applies to whole mode only"),
      std::string::npos);
  EXPECT_NE(
      Cluster({"--input=" + data.csv, "--k=6", "--resident=false", "--max_points_per_center=500"})
          .err.find("--max_points_per_center needs resident shards"),
      std::string::npos);
}

TEST_F(CliClusterTest, ModelsPrintParametersAsTheyAreTyped) {
  std::string out, err;
  ASSERT_EQ(RunProgram({CliBinary(), "models", "--server=" + server_->address()}, &out, &err), 0)
      << err;
  EXPECT_NE(out.find("  --parameters=beta=VALUE: "), std::string::npos) << out;
  EXPECT_NE(out.find("range (0, inf)"), std::string::npos) << out;
  EXPECT_NE(out.find("range [0, inf)"), std::string::npos) << out;
  EXPECT_EQ(out.find("  --beta:"), std::string::npos) << out;
}

// The programs print the project's version (the one CMake's project() sets,
// which kmt_build_info and the Python package carry too) and their SIMD
// level.
TEST_F(CliClusterTest, VersionIsTheProjects) {
  for (const std::string& program : {CliBinary(), ServerBinary()}) {
    SCOPED_TRACE(program);
    std::string out, err;
    ASSERT_EQ(RunProgram({program, "--version"}, &out, &err), 0) << err;
    const std::string name = program.substr(program.rfind('/') + 1);
    EXPECT_EQ(out.rfind(name + " " KMT_VERSION "\nsimd ", 0), 0u) << out;
    EXPECT_EQ(out.find("Debug build"), std::string::npos) << out;
  }
}

// A raw bfloat16 file and a float16 .npy are read as their float32 values:
// the run on each is the run on the float32 .npy of those values.
TEST_F(CliClusterTest, NarrowFilesClusterAsTheFloat32FileOfTheirValues) {
  const Matrix<float> points = HundredThousand().points.leftCols(3000);
  const int64_t n = points.cols(), d = points.rows();
  std::vector<uint16_t> bf16(points.size()), f16(points.size());
  Matrix<float> bf16_values(d, n), f16_values(d, n);
  for (Eigen::Index i = 0; i < points.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &points.data()[i], 4);
    bf16[i] = static_cast<uint16_t>(bits >> 16);  // the float cut to bfloat16
    bf16_values.data()[i] = WidenBFloat16(bf16[i]);
    // Binary16 values of 2^-4 to 2^8, of either sign, spread by i.
    f16[i] = static_cast<uint16_t>((0x2c00 + (i * 7919) % 0x3000) | (i % 3 == 0 ? 0x8000 : 0));
    f16_values.data()[i] = WidenFloat16(f16[i]);
  }
  std::ofstream(dir_ + "/p.bf16", std::ios::binary)
      .write(reinterpret_cast<const char*>(bf16.data()), 2 * bf16.size());
  ASSERT_TRUE(WriteNpy(dir_ + "/h.npy", "<f2", {n, d}, f16.data(), 2 * f16.size()).ok());
  struct Pair {
    std::string narrow, wide;
    const Matrix<float>& values;
  } pairs[] = {{dir_ + "/p.bf16", dir_ + "/bw.npy", bf16_values},
               {dir_ + "/h.npy", dir_ + "/hw.npy", f16_values}};
  for (const Pair& pair : pairs) {
    SCOPED_TRACE(pair.narrow);
    ASSERT_TRUE(
        WriteNpy(pair.wide, "<f4", {n, d}, pair.values.data(), pair.values.size() * sizeof(float))
            .ok());
    std::vector<std::vector<float>> centers;
    std::vector<Labels> labels;
    for (const std::string& input : {pair.narrow, pair.wide}) {
      const Run run =
          Cluster({"--mode=per-batch", "--input=" + input, "--d=8", "--k=4", "--seed=3",
                   "--labels_out=" + dir_ + "/l.txt", "--centers_out=" + dir_ + "/c.npy"});
      ASSERT_EQ(run.code, 0) << run.err;
      labels.push_back(ReadLabels(dir_ + "/l.txt"));
      centers.push_back(ReadNpy<float>(dir_ + "/c.npy"));
    }
    EXPECT_EQ(labels[0].size(), static_cast<size_t>(n));
    EXPECT_EQ(labels[0], labels[1]);
    EXPECT_EQ(centers[0], centers[1]);
  }
}

// An SVMlight file is clustered whole on sparse resident shards: from the
// same given centers, the labels of the dense .npy of its values and
// centers within the round-off of their sums; k-means++ runs on it; a
// malformed line is refused naming the file and the line.
TEST_F(CliClusterTest, SparseFilesClusterAsTheDenseFileOfTheirValues) {
  const CsrMatrix<float> docs = TfIdfDocuments<float>({.n = 1500, .d = 300, .terms = 12}, 31);
  const Matrix<float> dense = docs.ToDense();
  const int64_t n = docs.rows(), d = docs.cols();
  {
    // libsvm's one-based indices, every value to the last bit.
    std::ofstream svm(dir_ + "/docs.svm");
    for (int64_t i = 0; i < n; ++i) {
      svm << (i % 3);
      for (int64_t p = docs.indptr()[i]; p < docs.indptr()[i + 1]; ++p) {
        svm << ' ' << docs.indices()[p] + 1 << ':' << absl::StrFormat("%.9g", docs.values()[p]);
      }
      svm << '\n';
    }
  }
  ASSERT_TRUE(WriteNpy(dir_ + "/docs.npy", "<f4", {n, d}, dense.data(), dense.size() * 4).ok());
  Matrix<float> centers(d, 5);
  for (int j = 0; j < 5; ++j) centers.col(j) = dense.col(300 * j);
  ASSERT_TRUE(WriteNpy(dir_ + "/c0.npy", "<f4", {5, d}, centers.data(), centers.size() * 4).ok());
  std::vector<Labels> labels;
  std::vector<std::vector<float>> fitted;
  for (const std::string input : {"docs.svm", "docs.npy"}) {
    SCOPED_TRACE(input);
    const Run run =
        Cluster({"--mode=whole", "--input=" + dir_ + "/" + input, "--k=5", "--d=300",
                 "--centers_in=" + dir_ + "/c0.npy", "--iterations=8",
                 "--labels_out=" + dir_ + "/l.txt", "--centers_out=" + dir_ + "/c.npy"});
    ASSERT_EQ(run.code, 0) << run.err;
    labels.push_back(ReadLabels(dir_ + "/l.txt"));
    fitted.push_back(ReadNpy<float>(dir_ + "/c.npy"));
  }
  ASSERT_EQ(labels[0].size(), static_cast<size_t>(n));
  EXPECT_EQ(labels[0], labels[1]);
  ASSERT_EQ(fitted[0].size(), fitted[1].size());
  for (size_t i = 0; i < fitted[0].size(); ++i) EXPECT_NEAR(fitted[0][i], fitted[1][i], 1e-6) << i;
  // Seeded on the replicas from the nonzeros, restarts included.
  const Run seeded = Cluster(
      {"--input=" + dir_ + "/docs.svm", "--k=5", "--n_init=2", "--labels_out=" + dir_ + "/l.txt"});
  ASSERT_EQ(seeded.code, 0) << seeded.err;
  EXPECT_EQ(ReadLabels(dir_ + "/l.txt").size(), static_cast<size_t>(n));
  std::ofstream(dir_ + "/bad.svm") << "1 1:0.5 3:1\n0 4:1 2:1\n";
  const Run bad = Cluster({"--input=" + dir_ + "/bad.svm", "--k=2"});
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("bad.svm:2: '2:1': index 2 is below the one before it"), std::string::npos)
      << bad.err;
  const Run per_batch = Cluster({"--input=" + dir_ + "/docs.svm", "--k=2", "--mode=per-batch"});
  EXPECT_NE(per_batch.code, 0);
  EXPECT_NE(per_batch.err.find("a sparse --input (SVMlight) is clustered as one dataset"),
            std::string::npos)
      << per_batch.err;
}

}  // namespace
}  // namespace kmt
