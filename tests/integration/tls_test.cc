// TLS and mutual TLS between the real client library and the real server,
// with certificates made by openssl at test time: who is served, who is
// refused, and a certificate rotation that keeps an open stream.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cluster_client.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/transport_security.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

// openssl; fails the test on error.
void OpenSsl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out, err;
  ASSERT_EQ(RunProgram(argv, &out, &err), 0) << err;
}

// A CA (dir/name.pem, .key) and a certificate it signs for localhost and
// 127.0.0.1 (dir/leaf.pem, .key), with the common name `cn`.
class Pki {
 public:
  explicit Pki(std::string dir) : dir_(std::move(dir)) {
    std::ofstream(dir_ + "/san.cnf") << "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
  }
  std::string Path(const std::string& name, const char* ext) const {
    return dir_ + "/" + name + ext;
  }
  void MakeCa(const std::string& name) {
    OpenSsl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-days", "2", "-subj", "/CN=" + name, "-keyout", Path(name, ".key"), "-out",
             Path(name, ".pem")});
  }
  void MakeLeaf(const std::string& name, const std::string& ca,
                const std::string& cn = "localhost") {
    OpenSsl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj",
             "/CN=" + cn, "-keyout", Path(name, ".key"), "-out", Path(name, ".csr")});
    OpenSsl({"x509", "-req", "-in", Path(name, ".csr"), "-CA", Path(ca, ".pem"), "-CAkey",
             Path(ca, ".key"), "-CAcreateserial", "-days", "2", "-extfile", dir_ + "/san.cnf",
             "-out", Path(name, ".pem")});
  }

 private:
  std::string dir_;
};

class TlsTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempDir("tls"));
    pki_ = new Pki(*dir_);
    pki_->MakeCa("ca-a");
    pki_->MakeCa("ca-b");
    pki_->MakeLeaf("server", "ca-a");
    pki_->MakeLeaf("client-a", "ca-a");
    pki_->MakeLeaf("client-b", "ca-b");
    pki_->MakeLeaf("operator", "ca-a", "kmt-operator");
  }

  static std::vector<std::string> ServerFlags(bool mutual) {
    std::vector<std::string> flags = {"--tls_cert=" + pki_->Path("server", ".pem"),
                                      "--tls_key=" + pki_->Path("server", ".key")};
    if (mutual) flags.push_back("--tls_client_ca=" + pki_->Path("ca-a", ".pem"));
    return flags;
  }

  // Whether ListModels succeeds from a client with these settings.
  static absl::Status Reach(const ServerProcess& server, const ClientTls& tls) {
    absl::StatusOr<ChannelSecurity> security = ClientSecurity(tls);
    if (!security.ok()) return security.status();
    Client client({.target = absl::StrCat("localhost:", server.port()),
                   .max_attempts = 1,
                   .stream_timeout = absl::Seconds(10),
                   .security = *security});
    return client.ListModels().status();
  }

  static ClientTls Trusting(const std::string& ca) {
    return {.enabled = true, .ca_file = pki_->Path(ca, ".pem")};
  }

  static std::string* dir_;
  static Pki* pki_;
};
std::string* TlsTest::dir_ = nullptr;
Pki* TlsTest::pki_ = nullptr;

TEST_F(TlsTest, TlsServesClientsTrustingItsCaAndNoOther) {
  const auto server = ServerProcess::Start(ServerFlags(/*mutual=*/false));
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(Reach(*server, Trusting("ca-a")).ok());
  EXPECT_EQ(Reach(*server, {}).code(), absl::StatusCode::kUnavailable);  // plaintext
  EXPECT_EQ(Reach(*server, Trusting("ca-b")).code(), absl::StatusCode::kUnavailable);
  // The name verified is the certificate's, whatever address is dialled.
  ClientTls wrong_name = Trusting("ca-a");
  wrong_name.server_name = "kmt.example.com";
  EXPECT_EQ(Reach(*server, wrong_name).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

TEST_F(TlsTest, MutualTlsServesOnlyClientsWithACertificateFromItsCa) {
  const auto server = ServerProcess::Start(ServerFlags(/*mutual=*/true));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Reach(*server, Trusting("ca-a")).code(), absl::StatusCode::kUnavailable);
  ClientTls other = Trusting("ca-a");
  other.cert_file = pki_->Path("client-b", ".pem");
  other.key_file = pki_->Path("client-b", ".key");
  EXPECT_EQ(Reach(*server, other).code(), absl::StatusCode::kUnavailable);
  ClientTls good = Trusting("ca-a");
  good.cert_file = pki_->Path("client-a", ".pem");
  good.key_file = pki_->Path("client-a", ".key");
  EXPECT_TRUE(Reach(*server, good).ok());
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

TEST_F(TlsTest, ModelControlIsOnlyForTheClientCertificatesTheOperatorNames) {
  std::vector<std::string> flags = ServerFlags(/*mutual=*/true);
  flags.push_back("--model_control");
  flags.push_back("--model_control_clients=kmt-operator");
  const auto server = ServerProcess::Start(flags);
  ASSERT_NE(server, nullptr);
  // UnloadModel of a model the server does not have: NOT_FOUND once allowed.
  const auto unload = [&](const std::string& leaf) {
    ClientTls tls = Trusting("ca-a");
    tls.cert_file = pki_->Path(leaf, ".pem");
    tls.key_file = pki_->Path(leaf, ".key");
    absl::StatusOr<ChannelSecurity> security = ClientSecurity(tls);
    EXPECT_TRUE(security.ok()) << security.status();
    auto stub = v1::KMeansTransformer::NewStub(
        security->Connect(absl::StrCat("localhost:", server->port()), {}));
    grpc::ClientContext context;
    v1::UnloadModelRequest request;
    request.set_name("nothing");
    v1::ModelControlResponse response;
    return stub->UnloadModel(&context, request, &response);
  };
  const grpc::Status other = unload("client-a");
  EXPECT_EQ(other.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(other.error_message().find("is not one that --model_control_clients names"),
            std::string::npos)
      << other.error_message();
  EXPECT_EQ(unload("operator").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);

  // TLS without client certificates cannot name anyone: refused at start.
  std::string out, err;
  EXPECT_EQ(RunProgram({ServerBinary(), "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
                        "--model_dir=", "--tls_cert=" + pki_->Path("server", ".pem"),
                        "--tls_key=" + pki_->Path("server", ".key"), "--model_control"},
                       &out, &err),
            1);
  EXPECT_NE(err.find("needs mutual TLS (--tls_client_ca)"), std::string::npos) << err;
}

TEST_F(TlsTest, BadTlsFilesStopTheServerAtStartWithTheReason) {
  std::string out, err;
  EXPECT_EQ(RunProgram({ServerBinary(), "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
                        "--model_dir=", "--tls_cert=/nonexistent.pem",
                        "--tls_key=" + pki_->Path("server", ".key")},
                       &out, &err),
            1);
  EXPECT_NE(err.find("cannot read certificate /nonexistent.pem"), std::string::npos) << err;
  EXPECT_EQ(ClientSecurity(Trusting("missing")).status().message(),
            "cannot read CA " + pki_->Path("missing", ".pem"));
}

TEST_F(TlsTest, RotatedCertificateIsServedAndAnOpenStreamGoesOn) {
  // The server's files live in their own directory, replaced in place.
  const std::string live = *dir_ + "/live";
  std::filesystem::create_directories(live);
  const auto copy = [&](const std::string& name) {
    for (const char* ext : {".pem", ".key"}) {
      std::filesystem::copy_file(pki_->Path(name, ext), live + "/tmp" + ext,
                                 std::filesystem::copy_options::overwrite_existing);
      std::filesystem::rename(live + "/tmp" + ext, live + "/server" + ext);
    }
  };
  copy("server");
  const auto server =
      ServerProcess::Start({"--tls_cert=" + live + "/server.pem",
                            "--tls_key=" + live + "/server.key", "--tls_refresh_seconds=1"});
  ASSERT_NE(server, nullptr);
  Client client({.target = absl::StrCat("localhost:", server->port()),
                 .stream_timeout = absl::Seconds(60),
                 .security = *ClientSecurity(Trusting("ca-a"))});

  // A stream sends one batch, waits for the rotation, then sends another.
  std::atomic<bool> rotated{false};
  int sent = 0, answered = 0;
  absl::Status stream;
  std::thread streaming([&] {
    stream = client.Cluster(
        [&](v1::ClusterRequest* r) {
          if (sent == 2) return false;
          if (sent == 1) {
            while (!rotated) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
          r->set_request_id(absl::StrCat(sent++));
          r->set_model("lloyd-onehot");
          r->set_n(4);
          r->set_d(1);
          for (float v : {0.f, 1.f, 10.f, 11.f}) r->add_points(v);
          r->set_k(2);
          r->set_iterations(3);
          return true;
        },
        [&](v1::ClusterResponse&& response) { answered += !response.has_error(); });
  });
  pki_->MakeCa("ca-c");
  pki_->MakeLeaf("server-c", "ca-c");
  copy("server-c");
  // New connections get the new certificate once the server reads it again.
  absl::Status reached = absl::UnavailableError("not tried");
  for (int i = 0; i < 100 && !reached.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reached = Reach(*server, Trusting("ca-c"));
  }
  EXPECT_TRUE(reached.ok()) << reached;
  rotated = true;
  streaming.join();
  EXPECT_TRUE(stream.ok()) << stream;
  EXPECT_EQ(answered, 2);
  // The connection made before the rotation still serves.
  EXPECT_TRUE(client.ListModels().ok());
  EXPECT_EQ(server->Terminate(absl::Seconds(30)), 0);
}

}  // namespace
}  // namespace kmt
