// The family of algorithms the engine serves: Lloyd's and paper A's variants
// (docs/variants.md). Each algorithm has one home, a subclass of Algorithm in
// core/algorithms/, that holds everything defining it: its name and
// description, its parameters (defaults and ranges), the batch preparation
// it needs, its fast center update, the circuits it is served as, and the
// plain reference the tests hold it to. The engine, the model list and the
// request checks iterate over the homes and never branch on an algorithm.
//
// Every algorithm assigns as Lloyd's does (each point to its nearest center,
// ties to the lowest index); they differ in how they prepare the batch and
// how they move the centers.
#ifndef KMT_CORE_ALGORITHM_H_
#define KMT_CORE_ALGORITHM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/cluster_sums.h"
#include "core/constructions.h"
#include "core/model.h"
#include "core/parameters.h"
#include "core/types.h"

namespace kmt {

// What a center update may read besides the points, labels and centers.
struct UpdateContext {
  const ParameterValues& parameters;  ///< resolved: every declared name present
  uint64_t seed = 0;                  ///< the request's seed (keys random draws)
  int layer = 0;                      ///< the layer being run, from 0
};

// One served exact model of an algorithm: the Lloyd circuit it runs on.
struct ServedCircuit {
  LloydOptions options;     ///< the circuit
  std::string name;         ///< registry name; empty: the circuit's (LloydModelName)
  std::string description;  ///< for ListModels; empty: the algorithm's
};

class Algorithm {
 public:
  struct Definition {
    std::string name;                       ///< e.g. "soft-kmeans"
    std::string description;                ///< what it computes, for ListModels
    std::vector<ParameterSpec> parameters;  ///< what a request may set, with defaults
    std::vector<ServedCircuit> served;      ///< the exact models it is served as
    /// The plain reference (reference/) its tests compare it with, layer
    /// by layer.
    std::string reference;
    /// Said after the error for a parameter it does not read.
    std::string unread_hint;
    /// Whether it has a standard weighted form, so that requests may weigh
    /// their points (each point counts w times).
    bool weighted = false;
    /// Whether it compares points and centers as unit vectors (Prepare
    /// scales them to norm 1), so that a client assigning points to its
    /// centers scales them too.
    bool unit_norm = false;
    /// Whether moving every point and center by one vector moves its
    /// centers by that vector and changes no label, so that a client may
    /// send the points minus their mean (precise distances in float32 far
    /// from the origin).
    bool translation_invariant = false;
    /// Whether its steps at the default parameters are exact Lloyd's
    /// steps, which a resident job's assign steps compute.
    bool lloyd_at_defaults = false;
  };

  virtual ~Algorithm() = default;
  Algorithm(const Algorithm&) = delete;
  Algorithm& operator=(const Algorithm&) = delete;

  const std::string& name() const { return definition_.name; }
  const std::string& description() const { return definition_.description; }
  const std::vector<ParameterSpec>& parameters() const { return definition_.parameters; }
  const std::vector<ServedCircuit>& served() const { return definition_.served; }
  const std::string& reference() const { return definition_.reference; }
  const std::string& unread_hint() const { return definition_.unread_hint; }
  bool weighted() const { return definition_.weighted; }
  bool unit_norm() const { return definition_.unit_norm; }
  bool translation_invariant() const { return definition_.translation_invariant; }
  bool lloyd_at_defaults() const { return definition_.lloyd_at_defaults; }

  // Whether Prepare changes anything (the engine copies the batch only then).
  virtual bool Prepares() const { return false; }
  // Prepares the batch's points, or its given centers, before any layer
  // (`what` names a column in errors: "point", "center"). Default: as they
  // are.
  virtual absl::Status Prepare(Matrix<float>* columns, const char* what) const;
  virtual absl::Status Prepare(Matrix<double>* columns, const char* what) const;

  // Whether the center update reads only each cluster's count and
  // coordinate sum (CentersFromSums): the fast path then takes them from the
  // sums its objective pass adds, with no pass of its own.
  virtual bool UpdatesFromSums() const { return false; }
  // The centers from the clusters' sums; returns how many kept their value.
  // Default: the means, an empty cluster keeping its center.
  virtual int CentersFromSums(const ClusterSums& sums, Matrix<float>* centers) const;
  virtual int CentersFromSums(const ClusterSums& sums, Matrix<double>* centers) const;

  // Replaces `centers` (d x k) by the update from the points (d x n) and
  // their labels (the nearest current center of each), the points weighed
  // by `weights` (n values; null: 1 each, and always null unless
  // weighted()). Returns the number of centers kept because their cluster
  // was empty. Default: the sums of the labels' clusters through
  // CentersFromSums.
  virtual int UpdateCenters(const UpdateContext& context, const Matrix<float>& points,
                            const Vector<float>* weights, const Labels& labels,
                            Matrix<float>* centers) const;
  virtual int UpdateCenters(const UpdateContext& context, const Matrix<double>& points,
                            const Vector<double>* weights, const Labels& labels,
                            Matrix<double>* centers) const;

  // Whether a run with these (resolved) parameters executes the dense
  // circuit instead of the fast path, and that circuit (into `model`), built
  // for the batch's d and k on the served `circuit`. Default: never.
  virtual bool RunsDense(const ParameterValues& parameters) const;
  virtual absl::Status DenseCircuit(int d, int k, const LloydOptions& circuit,
                                    const ParameterValues& parameters, Model<float>* model) const;
  virtual absl::Status DenseCircuit(int d, int k, const LloydOptions& circuit,
                                    const ParameterValues& parameters, Model<double>* model) const;

 protected:
  explicit Algorithm(Definition definition) : definition_(std::move(definition)) {}

 private:
  Definition definition_;
};

// Every algorithm, in the order ListModels gives their models.
const std::vector<const Algorithm*>& Algorithms();
// The algorithm named `name`, or null.
const Algorithm* FindAlgorithm(absl::string_view name);
// Lloyd's algorithm: the steps a learned model hands over to.
const Algorithm& LloydAlgorithm();

}  // namespace kmt

#endif  // KMT_CORE_ALGORITHM_H_
