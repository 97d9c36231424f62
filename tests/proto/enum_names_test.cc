// The contract's enums and the engine's, translated by their shared names.
#include "proto/enum_names.h"

#include <gtest/gtest.h>

#include "core/attention.h"
#include "core/empty_clusters.h"
#include "core/init.h"
#include "core/input_scaling.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {
namespace {

TEST(EnumNames, AValueIsNamedWithoutItsPrefixInLowerCaseWithHyphens) {
  EXPECT_EQ(EngineName<v1::EmptyClusters>(v1::EMPTY_CLUSTERS_RELOCATE_FARTHEST),
            "relocate-farthest");
  EXPECT_EQ(EngineName<v1::InputScalingProto>(v1::SCALING_GLOBAL_MIN_MAX), "global-min-max");
  EXPECT_EQ(EngineName<v1::NormalizerProto>(v1::NORMALIZER_SPARSEMAX), "sparsemax");
  EXPECT_EQ(EngineName<v1::Init>(v1::INIT_RANDOM), "random");
  EXPECT_EQ(EngineName<v1::Init>(v1::INIT_GIVEN), "given");
}

TEST(EnumNames, PlusIsSpeltOutInTheContract) {
  EXPECT_EQ(EngineName<v1::Init>(v1::INIT_KMEANS_PLUS_PLUS), "kmeans++");
  EXPECT_EQ(EngineName<v1::Init>(v1::INIT_PLAIN_KMEANS_PLUS_PLUS), "plain-kmeans++");
  EXPECT_EQ(ProtoValue<v1::Init>("plain-kmeans++"), v1::INIT_PLAIN_KMEANS_PLUS_PLUS);
}

TEST(EnumNames, AnUndefinedNumberOrNameHasNone) {
  EXPECT_EQ(EngineName<v1::EmptyClusters>(9), "");
  EXPECT_EQ(FindByEngineName(*v1::EmptyClusters_descriptor(), "farthest"), nullptr);
  EXPECT_EQ(FindByEngineName(*v1::EmptyClusters_descriptor(), "EMPTY_CLUSTERS_KEEP"), nullptr);
}

// Each engine value has its contract value and comes back from it, and each
// contract value names an engine value.
template <typename ProtoEnum, typename Engine, typename Name, typename Parse>
void ExpectOneToOne(std::initializer_list<Engine> values, Name name, Parse parse) {
  for (Engine value : values) {
    SCOPED_TRACE(name(value));
    const ProtoEnum proto = ProtoValue<ProtoEnum>(name(value));
    const absl::StatusOr<Engine> back = parse(EngineName<ProtoEnum>(proto));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, value);
  }
  // lifetime: descriptors live as long as the process.
  const google::protobuf::EnumDescriptor& e = *google::protobuf::GetEnumDescriptor<ProtoEnum>();
  EXPECT_EQ(e.value_count(), static_cast<int>(values.size())) << e.name();
}

TEST(EnumNames, TheTranslatedEnumsCorrespondOneToOne) {
  ExpectOneToOne<v1::EmptyClusters>(
      {EmptyClusterPolicy::kKeep, EmptyClusterPolicy::kRelocateFarthest,
       EmptyClusterPolicy::kSplitLargest},
      EmptyClusterPolicyName, ParseEmptyClusterPolicy);
  ExpectOneToOne<v1::InputScalingProto>(
      {InputScaling::kNone, InputScaling::kMinMax, InputScaling::kGlobalMinMax}, InputScalingName,
      ParseInputScaling);
  ExpectOneToOne<v1::NormalizerProto>(
      {Normalizer::kSoftmax, Normalizer::kHardmax, Normalizer::kLinear, Normalizer::kSparsemax,
       Normalizer::kNormmax, Normalizer::kGumbel},
      NormalizerName, ParseNormalizer);
}

TEST(EnumNames, EveryInitButGivenIsAnEngineMethod) {
  const google::protobuf::EnumDescriptor& e = *v1::Init_descriptor();  // lifetime: static
  for (int i = 0; i < e.value_count(); ++i) {
    const int number = e.value(i)->number();
    SCOPED_TRACE(e.value(i)->name());
    EXPECT_EQ(ParseInitMethod(EngineName<v1::Init>(number)).ok(), number != v1::INIT_GIVEN);
  }
}

}  // namespace
}  // namespace kmt
