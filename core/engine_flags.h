// The engine's settings as every program of this project takes them:
// --simd (or the KMT_SIMD environment variable), the SIMD level of the
// kernels, and --low_precision, the assignment's low-precision filter
// (core/simd.h). A program hands EngineFlags() to ParseCommandLine, which
// applies them once the flags are parsed and prints their line at --version.
// The core library itself defines no flag: a library user (the Python
// extension, a test) sets the levels through core/simd.h.
#ifndef KMT_CORE_ENGINE_FLAGS_H_
#define KMT_CORE_ENGINE_FLAGS_H_

#include "base/command_line.h"

namespace kmt {

ProgramSettings EngineFlags();

}  // namespace kmt

#endif  // KMT_CORE_ENGINE_FLAGS_H_
