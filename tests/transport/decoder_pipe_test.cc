#include "transport/decoder_pipe.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tether::transport {
namespace {

using std::chrono_literals::operator""ms;

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// A connected pair of stream sockets, closed at the end of the test.
struct SocketPair {
  SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~SocketPair() {
    for (int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
  void Close(int i) {
    ::close(fd[i]);
    fd[i] = -1;
  }
  int fd[2] = {-1, -1};
};

TEST(DecoderPipe, RepliesComeBackInOrderAndErrorsDoNotEndTheExchange) {
  SocketPair s;
  absl::Status served;
  std::thread decoder([&] {
    served = ServeDecodeRequests(
        s.fd[1], s.fd[1],
        [](std::span<const std::byte> b) -> absl::StatusOr<std::string> {
          // The decoder sees 8-byte aligned bytes, as Cap'n Proto needs.
          EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 8, 0u);
          std::string text(reinterpret_cast<const char*>(b.data()), b.size());
          if (text == "bad") return absl::InvalidArgumentError("not a message");
          return absl::StrCat("{\"n\":", b.size(), "}");
        });
  });
  ASSERT_TRUE(WriteDecodeRequest(s.fd[0], Bytes("hello")).ok());
  EXPECT_EQ(*ReadDecodeReply(s.fd[0], 5000ms), "{\"n\":5}");
  ASSERT_TRUE(WriteDecodeRequest(s.fd[0], Bytes("bad")).ok());
  absl::StatusOr<std::string> bad = ReadDecodeReply(s.fd[0], 5000ms);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_EQ(bad.status().message(), "not a message");
  ASSERT_TRUE(WriteDecodeRequest(s.fd[0], Bytes("")).ok());
  EXPECT_EQ(*ReadDecodeReply(s.fd[0], 5000ms), "{\"n\":0}");
  const std::string big(1 << 20, 'x');
  ASSERT_TRUE(WriteDecodeRequest(s.fd[0], Bytes(big)).ok());
  EXPECT_EQ(*ReadDecodeReply(s.fd[0], 5000ms), "{\"n\":1048576}");
  s.Close(0);  // the client goes: the decoder ends cleanly
  decoder.join();
  EXPECT_TRUE(served.ok()) << served;
}

TEST(DecoderPipe, AGoneDecoderIsUnavailableNotASignal) {
  SocketPair s;
  s.Close(1);
  absl::Status w = WriteDecodeRequest(s.fd[0], Bytes("hello"));
  EXPECT_TRUE(absl::IsUnavailable(w)) << w;  // and no SIGPIPE killed us
  absl::StatusOr<std::string> r = ReadDecodeReply(s.fd[0], 5000ms);
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
}

TEST(DecoderPipe, ASilentDecoderTimesOut) {
  SocketPair s;
  absl::StatusOr<std::string> r = ReadDecodeReply(s.fd[0], 50ms);
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
}

TEST(DecoderPipe, ADecoderThatStopsReadingTimesOutTheWriteWithSendTimeout) {
  SocketPair s;
  const timeval t{.tv_sec = 0, .tv_usec = 100'000};
  ASSERT_EQ(::setsockopt(s.fd[0], SOL_SOCKET, SO_SNDTIMEO, &t, sizeof(t)), 0);
  // Far more than the socket buffers hold; nobody reads fd[1].
  const std::string big(8 << 20, 'x');
  const absl::Status st = WriteDecodeRequest(s.fd[0], Bytes(big));
  EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  EXPECT_NE(std::string(st.message()).find("not reading"), std::string::npos)
      << st;
}

TEST(DecoderPipe, ADecoderThatDribblesItsReplyTimesOutInAll) {
  SocketPair s;
  // A reply head announcing 100 bytes, then one byte every 10 ms: each read
  // is in time, the whole reply (1 s) is not.
  std::thread dribbler([&] {
    const unsigned char head[5] = {0, 100, 0, 0, 0};  // JSON, 100 bytes
    (void)!::send(s.fd[1], head, sizeof(head), MSG_NOSIGNAL);
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(10ms);
      if (::send(s.fd[1], "x", 1, MSG_NOSIGNAL) != 1) return;
    }
  });
  absl::StatusOr<std::string> r = ReadDecodeReply(s.fd[0], 300ms);
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  dribbler.join();
}

TEST(DecoderPipe, MalformedOrCutRepliesAreUnavailable) {
  {
    SocketPair s;
    const unsigned char wrong_kind[5] = {7, 0, 0, 0, 0};
    ASSERT_EQ(::write(s.fd[1], wrong_kind, 5), 5);
    absl::StatusOr<std::string> r = ReadDecodeReply(s.fd[0], 5000ms);
    EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
    EXPECT_NE(r.status().message().find("malformed"), std::string::npos);
  }
  {
    SocketPair s;
    const unsigned char cut[7] = {0, 10, 0, 0, 0, '{', '}'};  // 10 promised
    ASSERT_EQ(::write(s.fd[1], cut, 7), 7);
    s.Close(1);
    absl::StatusOr<std::string> r = ReadDecodeReply(s.fd[0], 5000ms);
    EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
    EXPECT_NE(r.status().message().find("cut short"), std::string::npos);
  }
}

TEST(DecoderPipe, TheDecoderRefusesMalformedRequests) {
  auto never = [](std::span<const std::byte>) -> absl::StatusOr<std::string> {
    ADD_FAILURE() << "decode called on a malformed request";
    return std::string();
  };
  {
    SocketPair s;
    unsigned char huge[8];
    std::memset(huge, 0xff, sizeof(huge));  // 2^64 - 1 bytes
    ASSERT_EQ(::write(s.fd[0], huge, 8), 8);
    absl::Status st = ServeDecodeRequests(s.fd[1], s.fd[1], never);
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  }
  {
    SocketPair s;
    const unsigned char cut[10] = {5, 0, 0, 0, 0, 0, 0, 0, 'h', 'i'};
    ASSERT_EQ(::write(s.fd[0], cut, 10), 10);
    s.Close(0);
    absl::Status st = ServeDecodeRequests(s.fd[1], s.fd[1], never);
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
    EXPECT_NE(st.message().find("cut short"), std::string::npos);
  }
}

}  // namespace
}  // namespace tether::transport
