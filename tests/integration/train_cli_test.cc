// kmt-train as a user runs it: a run stopped half-way and resumed from its
// checkpoint writes the same weights as one that ran straight through, the
// model file carries its provenance, --family picks the training noise and
// --init the tasks' initial centers.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kmt
