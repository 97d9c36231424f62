// kmt-train as a user runs it: a run stopped half-way and resumed from its
// checkpoint writes the same weights as one that ran straight through, the
// model file carries its provenance, --family picks the training noise and
// --init the tasks' initial centers; --data trains on a dataset's training
// rows alone, reproducibly by seed.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "io/npy.h"
#include "learn/trainer.h"
#include "proto/model_file.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

std::vector<std::string> Tiny(const std::string& out) {
  return {KMT_TRAIN_BINARY,
          "--d=2",
          "--k=3",
          "--n=48",
          "--batch=4",
          "--steps=30",
          "--eval_every=10",
          "--validation_tasks=4",
          "--checkpoint_every=7",
          "--embedding=binary",
          "--seed=5",
          "--name=tiny",
          "--out=" + out};
}

TEST(TrainCli, ResumedRunWritesTheSameWeightsAsAStraightRun) {
  const std::string dir = TempDir("train");
  std::string out, err;
  ASSERT_EQ(RunProgram(Tiny(dir + "/straight.kmt"), &out, &err), 0) << err;

  std::vector<std::string> first = Tiny(dir + "/resumed.kmt");
  first.push_back("--stop_after=13");
  ASSERT_EQ(RunProgram(first, &out, &err), 0) << err;
  EXPECT_NE(out.find("stopped at step 13"), std::string::npos) << out;
  std::vector<std::string> second = Tiny(dir + "/resumed.kmt");
  second.push_back("--resume");
  ASSERT_EQ(RunProgram(second, &out, &err), 0) << err;
  EXPECT_NE(err.find("resuming"), std::string::npos) << err;

  const v1::ModelFile straight = *ReadModelFile(dir + "/straight.kmt");
  const v1::ModelFile resumed = *ReadModelFile(dir + "/resumed.kmt");
  ASSERT_EQ(straight.layers_size(), 1);
  EXPECT_EQ(straight.layers(0).SerializeAsString(), resumed.layers(0).SerializeAsString());
  EXPECT_EQ(straight.name(), "tiny");
  EXPECT_EQ(straight.input_scaling(), v1::SCALING_GLOBAL_MIN_MAX);
  EXPECT_TRUE(straight.reembed());
  EXPECT_EQ(straight.provenance().seed(), 5u);
  EXPECT_NE(straight.provenance().training_config().find("steps=30"), std::string::npos);
  EXPECT_GT(straight.provenance().final_metrics().at("validation_ratio"), 0);
  EXPECT_TRUE(ModelFromProto<float>(straight).ok());
}

TEST(TrainCli, ResumeRefusesACheckpointOfOtherOptions) {
  const std::string dir = TempDir("train-other");
  std::vector<std::string> first = Tiny(dir + "/m.kmt");
  first.push_back("--stop_after=5");
  std::string out, err;
  ASSERT_EQ(RunProgram(first, &out, &err), 0) << err;
  std::vector<std::string> other = Tiny(dir + "/m.kmt");
  other.push_back("--resume");
  other.push_back("--lr=0.5");
  EXPECT_EQ(RunProgram(other, &out, &err), 1);
  EXPECT_NE(err.find("was made with other options"), std::string::npos) << err;
}

TEST(TrainCli, FamilyFlagTrainsOnThatNoise) {
  const std::string dir = TempDir("train-family");
  std::string out, err;
  ASSERT_EQ(RunProgram(Tiny(dir + "/normal.kmt"), &out, &err), 0) << err;
  std::vector<std::string> laplace = Tiny(dir + "/laplace.kmt");
  laplace.push_back("--family=laplace");
  ASSERT_EQ(RunProgram(laplace, &out, &err), 0) << err;
  const v1::ModelFile normal = *ReadModelFile(dir + "/normal.kmt");
  const v1::ModelFile other = *ReadModelFile(dir + "/laplace.kmt");
  EXPECT_NE(normal.provenance().training_config().find("family=normal\n"), std::string::npos);
  EXPECT_NE(other.provenance().training_config().find("family=laplace\n"), std::string::npos);
  EXPECT_NE(other.description().find("trained on laplace mixtures"), std::string::npos)
      << other.description();
  // Same seed, other tasks: other weights.
  EXPECT_NE(normal.layers(0).SerializeAsString(), other.layers(0).SerializeAsString());

  std::vector<std::string> unknown = Tiny(dir + "/unknown.kmt");
  unknown.push_back("--family=uniform");
  EXPECT_EQ(RunProgram(unknown, &out, &err), 1);
  EXPECT_NE(err.find("unknown family 'uniform'"), std::string::npos) << err;
}

TEST(TrainCli, InitFlagTrainsFromThoseCentersAndTheFileRecordsThem) {
  const std::string dir = TempDir("train-init");
  std::string out, err;
  ASSERT_EQ(RunProgram(Tiny(dir + "/random.kmt"), &out, &err), 0) << err;
  std::vector<std::string> mixed = Tiny(dir + "/mixed.kmt");
  mixed.push_back("--init=kmeans++,random");
  ASSERT_EQ(RunProgram(mixed, &out, &err), 0) << err;
  const v1::ModelFile random = *ReadModelFile(dir + "/random.kmt");
  const v1::ModelFile other = *ReadModelFile(dir + "/mixed.kmt");
  ASSERT_EQ(random.trained_inits_size(), 1);
  EXPECT_EQ(random.trained_inits(0), v1::INIT_RANDOM);
  ASSERT_EQ(other.trained_inits_size(), 2);
  EXPECT_EQ(other.trained_inits(0), v1::INIT_KMEANS_PLUS_PLUS);
  EXPECT_EQ(other.trained_inits(1), v1::INIT_RANDOM);
  EXPECT_NE(other.provenance().training_config().find("init=kmeans++,random\n"), std::string::npos);
  EXPECT_NE(other.description().find("from kmeans++,random initial centers"), std::string::npos)
      << other.description();
  EXPECT_NE(random.layers(0).SerializeAsString(), other.layers(0).SerializeAsString());

  for (const char* bad : {"--init=given", "--init=random,random", "--init="}) {
    std::vector<std::string> refused = Tiny(dir + "/bad.kmt");
    refused.push_back(bad);
    EXPECT_EQ(RunProgram(refused, &out, &err), 1) << bad;
    EXPECT_NE(err.find("init"), std::string::npos) << bad << ": " << err;
  }
}

// 60 points of d = 3 in three groups, in a user's units; rows from
// `changed_from` on are moved far away, as another file's held-out part.
std::string WriteData(const std::string& path, int changed_from) {
  std::vector<float> values;
  for (int i = 0; i < 60; ++i) {
    const float group = static_cast<float>(i % 3), wobble = static_cast<float>((i * 7) % 5);
    const float shift = i >= changed_from ? 1000.0f : 0.0f;
    for (float v : {20 * group + wobble, -5 * group - wobble, 3 * wobble}) {
      values.push_back(v + shift);
    }
  }
  EXPECT_TRUE(WriteNpy(path, "<f4", {60, 3}, values.data(), 60 * 3 * 4).ok());
  return path;
}

std::vector<std::string> TinyOnData(const std::string& data, const std::string& out) {
  std::vector<std::string> args = Tiny(out);
  args.push_back("--n=24");  // after Tiny's --n=48: fewer than the 40 training rows
  args.push_back("--data=" + data);
  args.push_back("--data_train_rows=0:40");
  args.push_back("--init=kmeans++,random");
  // Thirty steps do not make a model ahead of Lloyd's.
  args.push_back("--write_behind_lloyd");
  return args;
}

TEST(TrainCli, DataTrainsOnItsTrainingRowsAloneReproduciblyBySeed) {
  const std::string dir = TempDir("train-data");
  const std::string data = WriteData(dir + "/data.npy", 60);
  const std::string other = WriteData(dir + "/other.npy", 40);
  std::string out, err;
  ASSERT_EQ(RunProgram(TinyOnData(data, dir + "/a.kmt"), &out, &err), 0) << err;
  EXPECT_NE(err.find("training on rows 0:40"), std::string::npos) << err;
  ASSERT_EQ(RunProgram(TinyOnData(data, dir + "/b.kmt"), &out, &err), 0) << err;
  // The held-out rows differ: the weights do not.
  ASSERT_EQ(RunProgram(TinyOnData(other, dir + "/held-out-changed.kmt"), &out, &err), 0) << err;
  std::vector<std::string> seed = TinyOnData(data, dir + "/seed.kmt");
  seed.push_back("--seed=6");
  ASSERT_EQ(RunProgram(seed, &out, &err), 0) << err;
  std::vector<std::string> rows = TinyOnData(data, dir + "/rows.kmt");
  rows.push_back("--data_train_rows=20:60");
  ASSERT_EQ(RunProgram(rows, &out, &err), 0) << err;

  const v1::ModelFile a = *ReadModelFile(dir + "/a.kmt");
  const std::string weights = a.layers(0).SerializeAsString();
  EXPECT_EQ(ReadModelFile(dir + "/b.kmt")->layers(0).SerializeAsString(), weights);
  EXPECT_EQ(ReadModelFile(dir + "/held-out-changed.kmt")->layers(0).SerializeAsString(), weights);
  EXPECT_NE(ReadModelFile(dir + "/seed.kmt")->layers(0).SerializeAsString(), weights);
  EXPECT_NE(ReadModelFile(dir + "/rows.kmt")->layers(0).SerializeAsString(), weights);
  EXPECT_EQ(a.d(), 3);
  EXPECT_EQ(a.input_scaling(), v1::SCALING_GLOBAL_MIN_MAX);
  EXPECT_NE(a.provenance().training_config().find("data_rows=0:40\n"), std::string::npos)
      << a.provenance().training_config();
  EXPECT_NE(a.description().find("subsets of n = 24 points of rows 0:40 of data.npy"),
            std::string::npos)
      << a.description();
  EXPECT_TRUE(ModelFromProto<float>(a).ok());
}

TEST(TrainCli, DataHoldsOutTheLastFifthByDefaultAndRefusesTooFewRows) {
  const std::string dir = TempDir("train-data-rows");
  const std::string data = WriteData(dir + "/data.npy", 60);
  std::vector<std::string> plain = Tiny(dir + "/m.kmt");
  plain.push_back("--n=24");
  plain.push_back("--data=" + data);
  plain.push_back("--write_behind_lloyd");
  std::string out, err;
  ASSERT_EQ(RunProgram(plain, &out, &err), 0) << err;
  EXPECT_NE(err.find("training on rows 0:48"), std::string::npos) << err;
  for (const char* bad : {"--data_train_rows=0:20", "--data_train_rows=50:70"}) {
    std::vector<std::string> refused = plain;
    refused.push_back(bad);
    EXPECT_EQ(RunProgram(refused, &out, &err), 1) << bad;
    EXPECT_NE(err.find("rows"), std::string::npos) << bad << ": " << err;
  }
}

// Data training cannot use is refused before any step, naming the file's row
// or its shape, with exit code 1 and no model written.
TEST(TrainCli, BadDataIsRefusedBeforeAnyStep) {
  const std::string dir = TempDir("train-bad-data");
  std::vector<float> values(60 * 3);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 17);
  const struct {
    std::string name;
    std::vector<int64_t> shape;
    float value;  // written at row 7, column 1
    std::string says;
  } cases[] = {
      {"nan.npy", {60, 3}, std::nanf(""), "nan.npy row 7 has NaN in column 1"},
      {"inf.npy", {60, 3}, -INFINITY, "inf.npy row 7 has Inf in column 1"},
      {"flat.npy", {180}, 0, "flat.npy has shape (180,); a dataset has shape (N, d)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<float> bad = values;
    bad[7 * 3 + 1] = c.value;
    ASSERT_TRUE(WriteNpy(dir + "/" + c.name, "<f4", c.shape, bad.data(), bad.size() * 4).ok());
    std::vector<std::string> args = TinyOnData(dir + "/" + c.name, dir + "/m.kmt");
    std::string out, err;
    EXPECT_EQ(RunProgram(args, &out, &err), 1);
    EXPECT_NE(err.find(c.says), std::string::npos) << err;
    EXPECT_EQ(err.find(" step "), std::string::npos) << err;  // no step ran
    EXPECT_FALSE(std::ifstream(dir + "/m.kmt").good());
  }
  // A shape of three dimensions.
  std::ofstream(dir + "/cube.npy", std::ios::binary)
      << std::string("\x93NUMPY\x01\x00\x76\x00", 10)
      << "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 5, 9), }" << std::string(55, ' ')
      << "\n"
      << std::string(4 * 5 * 9 * 4, '\0');
  std::string out, err;
  EXPECT_EQ(RunProgram(TinyOnData(dir + "/cube.npy", dir + "/m.kmt"), &out, &err), 1);
  EXPECT_NE(err.find("(4, 5, 9)"), std::string::npos) << err;
}

TEST(TrainCli, AModelNotAheadOfLloydsOnItsValidationRowsIsWrittenOnlyWhenAsked) {
  const std::string dir = TempDir("train-validation");
  const std::string data = WriteData(dir + "/data.npy", 60);
  std::vector<std::string> args = TinyOnData(data, dir + "/behind.kmt");
  args.pop_back();  // no --write_behind_lloyd
  args.push_back("--data_validation_tasks=40");
  std::string out, err;
  EXPECT_EQ(RunProgram(args, &out, &err), 1) << err;
  EXPECT_NE(err.find("training on rows 0:40 of " + data), std::string::npos) << err;
  EXPECT_NE(err.find("validating on rows 40:50"), std::string::npos) << err;
  EXPECT_NE(err.find("not ahead of Lloyd's on its validation rows by two standard errors and "
                     "0.001"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("no model was written"), std::string::npos) << err;
  EXPECT_FALSE(std::ifstream(dir + "/behind.kmt").good());
  // Its evidence, per start it is served with.
  EXPECT_NE(out.find("validation (rows 40:50, kmeans++ starts, 10 steps): "), std::string::npos)
      << out;
  EXPECT_NE(out.find("validation (rows 40:50, random starts, 10 steps): "), std::string::npos)
      << out;

  args.push_back("--write_behind_lloyd");
  ASSERT_EQ(RunProgram(args, &out, &err), 0) << err;
  const v1::ModelFile file = *ReadModelFile(dir + "/behind.kmt");
  const auto& metrics = file.provenance().final_metrics();
  EXPECT_EQ(metrics.at("validation_ahead"), 0);
  EXPECT_EQ(metrics.at("validation_first_row"), 40);
  EXPECT_EQ(metrics.at("validation_end_row"), 50);
  EXPECT_EQ(metrics.at("validation_tasks"), 40);
  // Not ahead: the gain plus two standard errors is not below -0.001.
  EXPECT_GE(metrics.at("validation_gain_kmeans++") + 2 * metrics.at("validation_se_kmeans++"),
            -1e-3);
  EXPECT_GE(metrics.at("validation_se_random"), 0);
  // The hand-over layer chosen on the validation rows is the file's.
  EXPECT_EQ(metrics.at("validation_lloyd_after"), file.lloyd_after());
  EXPECT_GE(file.lloyd_after(), 0);
  EXPECT_LT(file.lloyd_after(), 10);
  EXPECT_NE(file.description().find("NOT ahead of Lloyd's on its validation rows"),
            std::string::npos)
      << file.description();

  // Served, `kmt models` prints that evidence; a file that lacks one of
  // the figures prints it as nan.
  v1::ModelFile stripped = file;
  stripped.set_name("stripped");
  stripped.mutable_provenance()->mutable_final_metrics()->erase("validation_end_row");
  ASSERT_TRUE(WriteModelFile(stripped, dir + "/stripped.kmt").ok());
  auto server = ServerProcess::Start({"--model_dir=" + dir});
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(RunProgram({KMT_CLI_BINARY, "models", "--server=" + server->address()}, &out, &err), 0)
      << err;
  EXPECT_NE(out.find("  validation (rows 40:50, 40 tasks, 10 steps, log objective against "
                     "Lloyd's): kmeans++ "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(", random "), std::string::npos) << out;
  EXPECT_NE(out.find("; NOT ahead of Lloyd's (written with --write_behind_lloyd)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  validation (rows 40:nan, 40 tasks"), std::string::npos) << out;

  // Validation rows that overlap the training rows are refused.
  std::vector<std::string> overlap = TinyOnData(data, dir + "/overlap.kmt");
  overlap.push_back("--data_validation_rows=30:50");
  EXPECT_EQ(RunProgram(overlap, &out, &err), 1);
  EXPECT_NE(err.find("validation rows 30:50 overlap the training rows 0:40"), std::string::npos)
      << err;
}

TEST(TrainCli, LloydAfterIsWrittenIntoTheModelFile) {
  const std::string dir = TempDir("train-lloyd-after");
  std::vector<std::string> args = Tiny(dir + "/m.kmt");
  args.push_back("--lloyd_after=4");
  std::string out, err;
  ASSERT_EQ(RunProgram(args, &out, &err), 0) << err;
  const v1::ModelFile file = *ReadModelFile(dir + "/m.kmt");
  EXPECT_EQ(file.lloyd_after(), 4);
  EXPECT_NE(file.description().find("exact Lloyd's steps after 4 layers"), std::string::npos)
      << file.description();
}

}  // namespace
}  // namespace kmt
