// CsrPoints decoded: the arrays as the CsrMatrix they encode, in float32 and
// float64, and each malformed array refused naming its field.
#include "proto/csr_payload.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/raw_payload.h"

namespace kmt {
namespace {

// Rows {1: 2.5, 3: -1}, {}, {0: 4} of 4 columns.
v1::CsrPoints Three(bool float64) {
  v1::CsrPoints csr;
  EncodeInt64(std::vector<int64_t>{0, 2, 2, 3}, csr.mutable_indptr_i64());
  EncodeInt32(std::vector<int>{1, 3, 0}, csr.mutable_indices_i32());
  if (float64) {
    EncodeFloat64(std::vector<double>{2.5, -1, 4}, csr.mutable_values_f64());
  } else {
    EncodeFloat32(std::vector<float>{2.5f, -1, 4}, csr.mutable_values_f32());
  }
  return csr;
}

TEST(CsrPayload, DecodesTheArraysInEitherPrecision) {
  absl::StatusOr<CsrMatrix<float>> f = CsrFromProto<float>(Three(false), 4);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->rows(), 3);
  EXPECT_EQ(f->indptr(), (std::vector<int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(f->indices(), (std::vector<int32_t>{1, 3, 0}));
  EXPECT_EQ(f->values(), (std::vector<float>{2.5f, -1, 4}));
  absl::StatusOr<CsrMatrix<double>> d = CsrFromProto<double>(Three(true), 4);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->values(), (std::vector<double>{2.5, -1, 4}));
  EXPECT_TRUE(CsrIsFloat64(Three(true)));
  EXPECT_FALSE(CsrIsFloat64(Three(false)));
  EXPECT_EQ(CsrRowCount(Three(false)), 3);
  EXPECT_EQ(CsrValueCount<float>(Three(false)), 3);
  EXPECT_EQ(CsrValueCount<double>(Three(true)), 3);
}

TEST(CsrPayload, RefusesEachMalformedArrayNamingIt) {
  struct Case {
    v1::CsrPoints csr;
    std::string message;
  };
  std::vector<Case> cases;
  const auto add = [&](const std::string& message, auto edit) {
    v1::CsrPoints csr = Three(false);
    edit(csr);
    cases.push_back({csr, message});
  };
  add("rows.values_f64 is set where the points are float32: send rows.values_f32",
      [](v1::CsrPoints& c) { c.set_values_f64(std::string(8, '\0')); });
  add("rows.indptr_i64 has 0 bytes, not a whole number of int64 offsets",
      [](v1::CsrPoints& c) { c.clear_indptr_i64(); });
  add("rows.indptr_i64 has 31 bytes", [](v1::CsrPoints& c) { c.mutable_indptr_i64()->pop_back(); });
  add("rows.indices_i32 has 11 bytes, not a whole number of int32 columns",
      [](v1::CsrPoints& c) { c.mutable_indices_i32()->pop_back(); });
  add("rows.values_f32 has 13 bytes, not a whole number of float32 values",
      [](v1::CsrPoints& c) { c.mutable_values_f32()->push_back('\0'); });
  add("rows: indices[1] = 3 (row 0) is outside [0, cols = 3)", [](v1::CsrPoints&) {});
  add("rows: indptr decreases at row 1", [](v1::CsrPoints& c) {
    c.clear_indptr_i64();
    EncodeInt64(std::vector<int64_t>{0, 2, 1, 3}, c.mutable_indptr_i64());
  });
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].message);
    // The outside-column case reads the points as 3 columns wide.
    absl::StatusOr<CsrMatrix<float>> got =
        CsrFromProto<float>(cases[i].csr, i == 5 ? 3 : 4, "rows");
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(got.status().message().find(cases[i].message), std::string::npos)
        << got.status().message();
  }
  EXPECT_EQ(CsrRowCount(cases[1].csr), -1);
  EXPECT_EQ(CsrValueCount<float>(cases[4].csr), -1);
}

}  // namespace
}  // namespace kmt
