// Model files: a model survives the trip through its message and through a
// file, input scaling included, and a file that cannot be used says why.
#include "proto/model_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <vector>

#include "core/constructions.h"
#include "proto/raw_payload.h"
#include "reference/variant_constructions.h"

namespace kmt {
namespace {

Model<double> Example() {
  Model<double> m = *LloydConstruction<double>(3, 4, {.embedding = Embedding::kBinary});
  m.name = "example";
  m.input_scaling = InputScaling::kMinMax;
  m.reembed = true;
  m.unit_norm = true;
  m.trained_inits = {InitMethod::kKMeansPlusPlus, InitMethod::kRandomSubset};
  m.layers[0][BlockId::kPointsToPoints].bV.setConstant(0.25);
  m.layers[0][BlockId::kCentersToPoints].beta = 7;
  m.layers[0][BlockId::kCentersToPoints].normalizer = Normalizer::kSoftmax;
  // A second layer with the sparse and sampled normalizers.
  LayerWeights<double> sparse = m.layers[0];
  sparse[BlockId::kPointsToCenters].normalizer = Normalizer::kGumbel;
  sparse[BlockId::kPointsToCenters].beta = 2.5;
  sparse[BlockId::kPointsToPoints].normalizer = Normalizer::kGumbel;  // beta = infinity
  sparse[BlockId::kCentersToPoints].normalizer = Normalizer::kNormmax;
  sparse[BlockId::kCentersToPoints].beta = 1;
  sparse[BlockId::kCentersToPoints].tau = 0.375;
  sparse[BlockId::kCentersToCenters].normalizer = Normalizer::kSparsemax;
  sparse[BlockId::kCentersToCenters].beta = 3;
  m.layers.push_back(sparse);
  return m;
}

void ExpectSame(const Model<double>& a, const Model<double>& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.d, b.d);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.embedding, b.embedding);
  EXPECT_EQ(a.input_scaling, b.input_scaling);
  EXPECT_EQ(a.reembed, b.reembed);
  EXPECT_EQ(a.unit_norm, b.unit_norm);
  EXPECT_EQ(a.norm_coordinate, b.norm_coordinate);
  EXPECT_EQ(a.keep_empty_centers, b.keep_empty_centers);
  EXPECT_EQ(a.trained_inits, b.trained_inits);
  EXPECT_EQ(a.lloyd_after, b.lloyd_after);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t t = 0; t < a.layers.size(); ++t) {
    for (BlockId id : kBlockIds) {
      SCOPED_TRACE(BlockName(id));
      const AttentionBlock<double>&x = a.layers[t][id], &y = b.layers[t][id];
      EXPECT_EQ(x.Q, y.Q);
      EXPECT_EQ(x.K, y.K);
      EXPECT_EQ(x.V, y.V);
      EXPECT_EQ(x.bQ, y.bQ);
      EXPECT_EQ(x.bK, y.bK);
      EXPECT_EQ(x.bV, y.bV);
      EXPECT_EQ(x.score, y.score);
      EXPECT_EQ(x.normalizer, y.normalizer);
      EXPECT_EQ(x.beta, y.beta);
      EXPECT_EQ(x.ties, y.ties);
      EXPECT_EQ(x.tau, y.tau);
    }
  }
}

TEST(ModelFile, AModelSurvivesItsMessage) {
  const v1::ModelFile file = ModelToProto(Example());
  EXPECT_EQ(file.input_scaling(), v1::SCALING_MIN_MAX);
  ASSERT_EQ(file.trained_inits_size(), 2);
  EXPECT_EQ(file.trained_inits(0), v1::INIT_KMEANS_PLUS_PLUS);
  EXPECT_EQ(file.trained_inits(1), v1::INIT_RANDOM);
  const v1::LayerProto& sparse = file.layers(1);
  EXPECT_EQ(sparse.points_to_centers().normalizer(), v1::NORMALIZER_GUMBEL);
  EXPECT_EQ(sparse.points_to_points().beta(), 0);  // infinity
  EXPECT_EQ(sparse.centers_to_points().normalizer(), v1::NORMALIZER_NORMMAX);
  EXPECT_EQ(sparse.centers_to_points().tau(), 0.375);
  EXPECT_EQ(sparse.centers_to_centers().normalizer(), v1::NORMALIZER_SPARSEMAX);
  const absl::StatusOr<Model<double>> back = ModelFromProto<double>(file);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(*back, Example());
}

TEST(ModelFile, TheLayerWhereLloydsTakesOverSurvivesItsMessage) {
  Model<double> m = *LloydConstruction<double>(3, 4, {});
  m.lloyd_after = 5;
  const v1::ModelFile file = ModelToProto(m);
  EXPECT_EQ(file.lloyd_after(), 5);
  ExpectSame(m, *ModelFromProto<double>(file));
  v1::ModelFile negative = file;
  negative.set_lloyd_after(-2);
  EXPECT_EQ(ModelFromProto<double>(negative).status().message(),
            "model lloyd_after = -2, must not be negative");
}

TEST(ModelFile, ThePaddedSizesSurviveTheirMessage) {
  Model<double> m = *LloydConstruction<double>(3, 4, {});
  m.reembed = true;
  m.padded_sizes = {{.d = 2, .k = 4}, {.d = 3, .k = 2}};
  const v1::ModelFile file = ModelToProto(m);
  ASSERT_EQ(file.padded_sizes_size(), 2);
  EXPECT_EQ(file.padded_sizes(1).d(), 3);
  EXPECT_EQ(file.padded_sizes(1).k(), 2);
  const Model<double> back = *ModelFromProto<double>(file);
  EXPECT_EQ(back.padded_sizes, m.padded_sizes);
  v1::ModelFile larger = file;
  larger.mutable_padded_sizes(0)->set_k(5);
  EXPECT_EQ(ModelFromProto<double>(larger).status().message(),
            "model padded size d = 2, k = 5 is not below its own d = 3, k = 4");
}

TEST(ModelFile, CenterStepsSurviveTheirMessage) {
  const Model<double> kmedoids = *KMedoidsConstruction<double>(3, 4, 2.5, 100);
  ASSERT_EQ(kmedoids.layers[0].center_steps.size(), 1u);
  const v1::ModelFile file = ModelToProto(kmedoids);
  ASSERT_EQ(file.layers(0).center_steps_size(), 1);
  const Model<double> back = *ModelFromProto<double>(file);
  ExpectSame(back, kmedoids);
  ASSERT_EQ(back.layers[0].center_steps.size(), 1u);
  const CenterStep<double>&a = back.layers[0].center_steps[0],
        &b = kmedoids.layers[0].center_steps[0];
  EXPECT_EQ(a.to_points.Q, b.to_points.Q);
  EXPECT_EQ(a.to_points.V, b.to_points.V);
  EXPECT_EQ(a.to_points.normalizer, Normalizer::kGumbel);
  EXPECT_EQ(a.to_points.beta, b.to_points.beta);
  EXPECT_EQ(a.to_centers.V, b.to_centers.V);
  v1::ModelFile bad = file;
  bad.mutable_layers(0)->mutable_center_steps(0)->mutable_to_points()->mutable_b_v()->RemoveLast();
  EXPECT_EQ(ModelFromProto<double>(bad).status().message(),
            "layer 0 center step 0 to_points b_V has 6 values; tokens have 7 dimensions");
}

TEST(ModelFile, TheDotProductCircuitSurvivesItsMessage) {
  const Model<double> dot = *LloydConstruction<double>(
      3, 4, {.theta3 = Theta3Form::kLinear, .score = ScoreKind::kDotProduct});
  const v1::ModelFile file = ModelToProto(dot);
  EXPECT_TRUE(file.norm_coordinate());
  ASSERT_TRUE(file.layers(0).has_center_feed_forward());
  EXPECT_EQ(file.layers(0).center_feed_forward().activation(), v1::ACTIVATION_RELU_SQUARED);
  const Model<double> back = *ModelFromProto<double>(file);
  ExpectSame(back, dot);
  ASSERT_TRUE(back.layers[0].center_feed_forward.has_value());
  const FeedForward<double>&a = *back.layers[0].center_feed_forward,
        &b = *dot.layers[0].center_feed_forward;
  EXPECT_EQ(a.W1, b.W1);
  EXPECT_EQ(a.b1, b.b1);
  EXPECT_EQ(a.W2, b.W2);
  EXPECT_EQ(a.b2, b.b2);
  EXPECT_EQ(MatchLloyd(back), Theta3Form::kLinear);

  v1::ModelFile bad = file;
  bad.mutable_layers(0)->mutable_center_feed_forward()->set_activation(v1::ACTIVATION_UNSPECIFIED);
  EXPECT_EQ(ModelFromProto<double>(bad).status().message(),
            "layer 0 feed-forward has activation 0; only ReLU^2 (1) is defined");
  bad = file;
  bad.mutable_layers(0)->mutable_center_feed_forward()->mutable_b1()->RemoveLast();
  EXPECT_EQ(ModelFromProto<double>(bad).status().message(),
            "layer 0 feed-forward b1 has 5 values; expected 6 hidden units (W1's rows) and "
            "tokens of 8");
  bad = file;
  bad.mutable_layers(0)->mutable_center_feed_forward()->mutable_w2()->set_cols(5);
  EXPECT_EQ(ModelFromProto<double>(bad).status().message(),
            "layer 0 feed-forward W2 is 8x5 with 48 values; expected 6 hidden units (W1's rows) "
            "and tokens of 8");
  bad = file;
  bad.set_norm_coordinate(false);
  EXPECT_EQ(ModelFromProto<double>(bad).status().message(),
            "layer 0 theta1 Q is 8x8 with 64 values; tokens have 7 dimensions");
}

TEST(ModelFile, AModelSurvivesAFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "kmt-model-file-test.kmt").string();
  v1::ModelFile file = ModelToProto(Example());
  file.set_description("round trip");
  ASSERT_TRUE(WriteModelFile(file, path).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  const absl::StatusOr<v1::ModelFile> read = ReadModelFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->description(), "round trip");
  ExpectSame(*ModelFromProto<double>(*read), Example());
  const absl::StatusOr<Model<double>> model = ReadModel<double>(path);
  ASSERT_TRUE(model.ok()) << model.status();
  ExpectSame(*model, Example());
  std::filesystem::remove(path);
}

TEST(ModelFile, UnusableFilesSayWhy) {
  EXPECT_EQ(ReadModelFile("/nonexistent/model.kmt").status().message(),
            "cannot open /nonexistent/model.kmt");
  EXPECT_EQ(ReadModel<float>("/nonexistent/model.kmt").status().message(),
            "cannot open /nonexistent/model.kmt");
  const std::string path =
      (std::filesystem::temp_directory_path() / "kmt-model-file-garbage.kmt").string();
  std::ofstream(path) << "not a model";
  EXPECT_EQ(ReadModelFile(path).status().message(),
            path + " is not a kmt.v1.ModelFile (protobuf parse failed)");
  std::filesystem::remove(path);

  v1::ModelFile file = ModelToProto(Example());
  file.set_name("");
  EXPECT_EQ(ModelFromProto<double>(file).status().message(), "model has no name");
  file = ModelToProto(Example());
  file.set_embedding("ternary");
  EXPECT_FALSE(ModelFromProto<double>(file).ok());
  file = ModelToProto(Example());
  file.mutable_layers(0)->mutable_centers_to_centers()->mutable_b_k()->RemoveLast();
  EXPECT_EQ(ModelFromProto<double>(file).status().message(),
            "layer 0 theta4 b_K has 4 values; tokens have 5 dimensions");
  file = ModelToProto(Example());
  file.set_input_scaling(static_cast<v1::InputScalingProto>(9));
  EXPECT_EQ(ModelFromProto<double>(file).status().message(), "model has unknown input scaling 9");
  file = ModelToProto(Example());
  file.mutable_layers(0)->mutable_points_to_centers()->mutable_v()->set_values(0, NAN);
  EXPECT_EQ(ModelFromProto<double>(file).status().message(),
            "layer 0 theta1: weights contain NaN or Inf");
  file = ModelToProto(Example());
  file.mutable_layers(0)->mutable_points_to_centers()->set_normalizer(
      static_cast<v1::NormalizerProto>(9));
  EXPECT_EQ(ModelFromProto<double>(file).status().message(),
            "layer 0 theta1 has unknown normalizer 9");
  file = ModelToProto(Example());
  file.mutable_layers(1)->mutable_centers_to_points()->set_tau(-1);
  EXPECT_EQ(ModelFromProto<double>(file).status().message(),
            "layer 1 theta3: normmax regularisation tau = -1 must be finite and >= 0");
  file = ModelToProto(Example());
  file.mutable_layers(1)->mutable_centers_to_centers()->set_beta(0);
  EXPECT_EQ(ModelFromProto<double>(file).status().message(),
            "layer 1 theta4: sparsemax needs a finite inverse temperature, not inf");
  file = ModelToProto(Example());
  file.add_trained_inits(v1::INIT_GIVEN);
  EXPECT_EQ(ModelFromProto<double>(file).status().message(),
            "model's trained_inits: INIT_GIVEN names no method: the centers are given");
  file = ModelToProto(Example());
  file.add_trained_inits(static_cast<v1::Init>(7));
  EXPECT_EQ(ModelFromProto<double>(file).status().message(),
            "model's trained_inits: unknown init 7");
  file = ModelToProto(Example());
  file.add_trained_inits(v1::INIT_RANDOM);
  EXPECT_EQ(ModelFromProto<double>(file).status().message(),
            "model lists the trained initialisation random twice");
}

// A fitted model's file: 2 centers of 3 dimensions and their mean as the
// offset, in double.
v1::ModelFile FittedExample() {
  Matrix<double> centers(3, 2);
  centers << 1, 4, 2, 5, 3, 7;  // d x k: center 0 is (1, 2, 3)
  v1::ModelFile file = FittedToProto<double>("fit", centers, {2.5, 3.5, 5});
  file.mutable_fitted()->set_n(10);
  file.mutable_fitted()->set_inertia(1.5);
  return file;
}

TEST(FittedModelFile, ReadsCentersMinusOffsetInThePrecisionOfTheFit) {
  absl::StatusOr<FittedCenters> fitted = FittedFromProto(FittedExample());
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  EXPECT_TRUE(fitted->float64());
  EXPECT_EQ(fitted->d(), 3);
  EXPECT_EQ(fitted->k(), 2);
  Matrix<double> shifted(3, 2);
  shifted << -1.5, 1.5, -1.5, 1.5, -2, 2;
  EXPECT_EQ(fitted->Centers<double>(), shifted);
  EXPECT_EQ(fitted->Offset<double>(), (std::vector<double>{2.5, 3.5, 5}));
  // A float32 batch takes them converted; the values here are exact.
  EXPECT_EQ(fitted->Centers<float>(), shifted.cast<float>());

  Matrix<float> f32(2, 1);
  f32 << 0.1f, 0.2f;
  absl::StatusOr<FittedCenters> narrow = FittedFromProto(FittedToProto<float>("f", f32, {}));
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  EXPECT_FALSE(narrow->float64());
  EXPECT_EQ(narrow->Centers<float>(), f32);
  EXPECT_TRUE(narrow->Offset<float>().empty());
}

TEST(FittedModelFile, SurvivesAFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "kmt_fitted_model_file_test.kmt").string();
  ASSERT_TRUE(WriteModelFile(FittedExample(), path).ok());
  absl::StatusOr<v1::ModelFile> read = ReadModelFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), FittedExample().SerializeAsString());
  EXPECT_TRUE(FittedFromProto(*read).ok());
}

TEST(FittedModelFile, NamesWhatIsWrong) {
  struct Case {
    const char* what;
    std::function<void(v1::ModelFile*)> spoil;
    const char* message;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto put = [](v1::ModelFile* f, std::vector<double> centers, std::vector<double> offset) {
    EncodeFloat64(centers, f->mutable_fitted()->mutable_centers());
    EncodeFloat64(offset, f->mutable_fitted()->mutable_offset());
  };
  const Case cases[] = {
      {"no name", [](v1::ModelFile* f) { f->clear_name(); }, "model has no name"},
      {"k = 0", [](v1::ModelFile* f) { f->set_k(0); },
       "fitted model has d = 3, k = 0; both must be at least 1"},
      {"layers", [](v1::ModelFile* f) { f->add_layers(); },
       "fitted model has 1 layers; a fitted model has none"},
      {"precision",
       [](v1::ModelFile* f) {
         f->mutable_fitted()->set_precision(v1::FittedCenters::PRECISION_UNSPECIFIED);
       },
       "fitted.precision is 0; it must be PRECISION_FLOAT32 (1) or PRECISION_FLOAT64 (2)"},
      {"short centers",
       [&](v1::ModelFile* f) {
         put(f, {1, 2, 3, 4, 5}, {0, 0, 0});
       },
       "fitted.centers_f64 has 40 bytes, expected k*d*8 = 2*3*8"},
      {"float32 bytes read as float64",
       [](v1::ModelFile* f) {
         f->mutable_fitted()->set_precision(v1::FittedCenters::PRECISION_FLOAT32);
       },
       "fitted.centers_f32 has 48 bytes, expected k*d*4 = 2*3*4"},
      {"short offset",
       [&](v1::ModelFile* f) {
         put(f, {1, 2, 3, 4, 5, 6}, {0, 0});
       },
       "fitted.offset_f64 has 16 bytes, expected d*8 = 3*8"},
      {"NaN center",
       [&](v1::ModelFile* f) {
         put(f, {1, 2, 3, 4, nan, 6}, {0, 0, 0});
       },
       "fitted.centers[1][1] is nan; every center must be finite"},
      {"infinite offset",
       [&](v1::ModelFile* f) {
         put(f, {1, 2, 3, 4, 5, 6}, {0, std::numeric_limits<double>::infinity(), 0});
       },
       "fitted.offset[1] is inf; it must be finite"},
      {"overflow",
       [&](v1::ModelFile* f) {
         put(f, {1e308, 2, 3, 4, 5, 6}, {-1e308, 0, 0});
       },
       "fitted.centers[0][0] minus fitted.offset[0] overflows"},
      {"negative n", [](v1::ModelFile* f) { f->mutable_fitted()->set_n(-1); },
       "fitted.n = -1, fitted.iterations = 0; neither may be negative"},
      {"NaN inertia", [&](v1::ModelFile* f) { f->mutable_fitted()->set_inertia(nan); },
       "fitted.inertia is nan; it must be finite and not negative"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::ModelFile file = FittedExample();
    c.spoil(&file);
    absl::StatusOr<FittedCenters> fitted = FittedFromProto(file);
    EXPECT_EQ(fitted.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(fitted.status().message(), c.message);
  }
  // Each reader refuses the other's files by name.
  EXPECT_EQ(ModelFromProto<double>(FittedExample()).status().message(),
            "model 'fit' is a fitted model (k centers), not layers");
  EXPECT_EQ(FittedFromProto(ModelToProto(Example())).status().message(),
            "model 'example' is not a fitted model (fitted is unset)");
}

}  // namespace
}  // namespace kmt
