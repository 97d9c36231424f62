// A test suite that shares one kmt-server on a loopback port, with the
// exact models alone: started before the suite's first test, stopped after
// its last.
#ifndef KMT_TESTS_INTEGRATION_ONE_SERVER_TEST_H_
#define KMT_TESTS_INTEGRATION_ONE_SERVER_TEST_H_

#include <gtest/gtest.h>

#include "tests/integration/server_process.h"

namespace kmt {

class OneServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = ServerProcess::Start({"--model_dir="}).release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  inline static ServerProcess* server_ = nullptr;
};

}  // namespace kmt

#endif  // KMT_TESTS_INTEGRATION_ONE_SERVER_TEST_H_
