// The live protocol's framing: round trips and every malformed case a peer can send.
#include "live/protocol.h"

#include <gtest/gtest.h>

#include <cstring>

namespace parmon::live {
namespace {

std::vector<Frame> DecodeAll(const std::string& bytes, Status* error, size_t step = 7) {
  FrameDecoder d;
  std::vector<Frame> out;
  for (size_t i = 0; i < bytes.size(); i += step) {
    d.Feed(bytes.data() + i, std::min(step, bytes.size() - i));
    while (auto f = d.Next())
      out.push_back(std::move(*f));
  }
  *error = d.error();
  return out;
}

TEST(ProtocolTest, FramesRoundTripInPieces) {
  std::string bytes = EncodeFrame(FrameType::kHello, EncodeHello(Hello{})) +
                      EncodeFrame(FrameType::kData, EncodeData(1234, "PARMONTR")) +
                      EncodeFrame(FrameType::kAck, EncodeAck(99)) +
                      EncodeFrame(FrameType::kBye, "");
  Status err;
  auto frames = DecodeAll(bytes, &err);
  ASSERT_TRUE(err.ok()) << err.message();
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0].type, FrameType::kHello);
  EXPECT_EQ(frames[1].type, FrameType::kData);
  uint64_t off = 0;
  std::string_view data;
  ASSERT_TRUE(DecodeData(frames[1].payload, &off, &data).ok());
  EXPECT_EQ(off, 1234u);
  EXPECT_EQ(data, "PARMONTR");
  ASSERT_TRUE(DecodeAck(frames[2].payload, &off).ok());
  EXPECT_EQ(off, 99u);
  EXPECT_EQ(frames[3].type, FrameType::kBye);
  EXPECT_TRUE(frames[3].payload.empty());
}

TEST(ProtocolTest, BadCrcIsRefused) {
  std::string f = EncodeFrame(FrameType::kData, EncodeData(0, "hello"));
  f.back() ^= 1;  // a payload bit
  Status err;
  EXPECT_TRUE(DecodeAll(f, &err).empty());
  EXPECT_NE(err.message().find("checksum"), std::string::npos) << err.message();
}

TEST(ProtocolTest, ForgedTypeOrLengthFailsTheCrc) {
  std::string f = EncodeFrame(FrameType::kData, EncodeData(0, "hello"));
  f[3] = static_cast<char>(FrameType::kControl);  // a valid type, but not the one signed
  Status err;
  EXPECT_TRUE(DecodeAll(f, &err).empty());
  EXPECT_FALSE(err.ok());
}

TEST(ProtocolTest, BadMagicAndTypeAreRefused) {
  std::string f = EncodeFrame(FrameType::kAck, EncodeAck(1));
  std::string bad_magic = f;
  bad_magic[0] = 'X';
  Status err;
  EXPECT_TRUE(DecodeAll(bad_magic, &err).empty());
  EXPECT_NE(err.message().find("magic"), std::string::npos);
  std::string bad_type = f;
  bad_type[3] = 42;
  EXPECT_TRUE(DecodeAll(bad_type, &err).empty());
  EXPECT_NE(err.message().find("unknown frame type 42"), std::string::npos) << err.message();
  bad_type[3] = 0;
  EXPECT_TRUE(DecodeAll(bad_type, &err).empty());
  EXPECT_FALSE(err.ok());
}

TEST(ProtocolTest, OversizedIsRefusedFromTheHeaderAlone) {
  uint8_t h[kFrameHeaderSize];
  std::string f = EncodeFrame(FrameType::kData, "");
  memcpy(h, f.data(), sizeof h);
  uint32_t len = kMaxFramePayload + 1;
  memcpy(h + 4, &len, 4);
  FrameType t;
  uint32_t got = 0;
  Status s = ParseFrameHeader(h, &t, &got);
  EXPECT_NE(s.message().find("over the limit"), std::string::npos) << s.message();
  // The decoder refuses it without waiting for (or holding) the declared bytes.
  FrameDecoder d;
  d.Feed(h, sizeof h);
  EXPECT_FALSE(d.Next());
  EXPECT_FALSE(d.error().ok());
  len = kMaxFramePayload;  // the limit itself is allowed
  memcpy(h + 4, &len, 4);
  EXPECT_TRUE(ParseFrameHeader(h, &t, &got).ok());
}

TEST(ProtocolTest, TruncatedFrameWaitsAndHoldsOnlyItself) {
  std::string f = EncodeFrame(FrameType::kData, EncodeData(7, std::string(1000, 'x')));
  FrameDecoder d;
  d.Feed(f.data(), f.size() - 1);
  EXPECT_FALSE(d.Next());
  EXPECT_TRUE(d.error().ok());
  EXPECT_EQ(d.buffered(), f.size() - 1);
  d.Feed(f.data() + f.size() - 1, 1);
  EXPECT_TRUE(d.Next());
}

TEST(ProtocolTest, PayloadsAreChecked) {
  uint64_t off;
  std::string_view bytes;
  EXPECT_FALSE(DecodeData("short", &off, &bytes).ok());
  EXPECT_FALSE(DecodeAck("1234567", &off).ok());
  EXPECT_FALSE(DecodeHello("not json").ok());
  EXPECT_FALSE(DecodeHello("[1,2]").ok());
  EXPECT_FALSE(DecodeHello(R"({"version":3,"role":"consumer"})").ok());
  EXPECT_FALSE(DecodeHello(R"({"version":1,"role":"root"})").ok());
  EXPECT_FALSE(
      DecodeHello(R"({"version":1,"role":"recorder","session":"../etc","stream_id":"a"})").ok());
  EXPECT_FALSE(DecodeHello(R"({"version":1,"role":"recorder","session":"x"})").ok());
  // Nesting as deep as a pre-HELLO frame allows is an error, not a stack overflow.
  EXPECT_FALSE(DecodeHello(std::string(30000, '[') + std::string(30000, ']')).ok());
  EXPECT_FALSE(DecodeHello(R"({"version":1,"role":"recorder","session":"a","stream_id":"b",)"
                           R"("rank":99999999999})")
                   .ok());
  Hello h;
  h.session = "app-12";
  h.stream_id = "abc123";
  h.rank = 3;
  h.ranks = 4;
  h.token = "s3cret";
  auto back = DecodeHello(EncodeHello(h));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->session, "app-12");
  EXPECT_EQ(back->rank, 3);
  EXPECT_EQ(back->token, "s3cret");
}

TEST(ProtocolTest, NamesEndpointsAndSecrets) {
  EXPECT_TRUE(ValidSessionName("ring_search-17.a"));
  EXPECT_FALSE(ValidSessionName(".hidden"));
  EXPECT_FALSE(ValidSessionName("a/b"));
  EXPECT_FALSE(ValidSessionName(""));
  EXPECT_EQ(SanitizeSessionName("prterun-host-1@0"), "prterun-host-1_0");
  EXPECT_TRUE(ValidSessionName(SanitizeSessionName("../..")));
  auto ep = ParseEndpoint("127.0.0.1:9000/run1");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->host, "127.0.0.1");
  EXPECT_EQ(ep->port, 9000);
  EXPECT_EQ(ep->session, "run1");
  ep = ParseEndpoint("[::1]:80");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->host, "::1");
  EXPECT_EQ(ep->port, 80);
  EXPECT_EQ(ParseEndpoint("localhost")->port, kDefaultPort);
  EXPECT_FALSE(ParseEndpoint("host:99999").ok());
  EXPECT_FALSE(ParseEndpoint(":80").ok());
  EXPECT_FALSE(ParseEndpoint("h:80/bad name").ok());
  EXPECT_TRUE(ConstantTimeEqual("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abcd"));
}

}  // namespace
}  // namespace parmon::live
