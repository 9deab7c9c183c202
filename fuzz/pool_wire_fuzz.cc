// libFuzzer target: the pool's wire format (pool/wire.h, pool/messages.h, pool/frame_io.h)
// as a worker and as a client see it. Workers take frames from any local process and from
// peers; clients take answers from the worker: no bytes may crash, over-read, allocate
// without bound or hang either side.
//
// Input: byte 0 picks the mode, byte 1 is a count used for response bodies (which carry
// none), the rest is the payload.
//   mode 0  the payload is a stream of frames (24-byte header + body): each header is
//           checked, each body decoded as the request and as the response of its type
//   mode 1  the payload is what a peer sends on a socket: RecvFrame reads frames from it
//           until it fails
// A body that decodes must encode back to the same bytes (the format has one spelling
// for each message, except that PUT_SEAL's commit and FETCH's found byte are true for any
// non-zero value: those must encode to a body that decodes the same).
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "net/socket_connection.h"
#include "pool/frame_io.h"
#include "pool/messages.h"
#include "pool/wire.h"

namespace tandem::pool {
namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

void FuzzRequest(MsgType type, std::string_view body) {
  switch (type) {
    case MsgType::kHello: {
      HelloRequest r;
      if (DecodeHelloRequest(body, &r).ok()) Check(EncodeHelloRequest(r) == body);
      break;
    }
    case MsgType::kExist:
    case MsgType::kGet:
    case MsgType::kRelease:
    case MsgType::kDirLookup:
    case MsgType::kFetch: {
      std::vector<std::string> keys;
      uint32_t max = type == MsgType::kFetch ? kMaxFetchKeys : kMaxKeysPerFrame;
      if (DecodeKeys(body, &keys, max).ok()) {
        Check(keys.size() <= max);
        for (const auto& k : keys) Check(!k.empty() && k.size() <= kMaxKeyBytes);
        Check(EncodeKeys(keys) == body);
      }
      break;
    }
    case MsgType::kPutAlloc: {
      std::vector<PutAllocItem> items;
      if (DecodePutAllocRequest(body, &items).ok()) {
        Check(items.size() <= kMaxKeysPerFrame);
        Check(EncodePutAllocRequest(items) == body);
      }
      break;
    }
    case MsgType::kPutSeal: {
      std::vector<PutSealItem> items;
      if (DecodePutSealRequest(body, &items).ok()) {
        std::string again = EncodePutSealRequest(items);
        Check(again.size() == body.size());
        std::vector<PutSealItem> reread;
        Check(DecodePutSealRequest(again, &reread).ok() && EncodePutSealRequest(reread) == again);
      }
      break;
    }
    case MsgType::kSoftPin: {
      uint32_t ttl_ms = 0;
      std::vector<std::string> keys;
      if (DecodeSoftPinRequest(body, &ttl_ms, &keys).ok()) {
        Check(keys.size() <= kMaxKeysPerFrame);
        Check(EncodeSoftPinRequest(ttl_ms, keys) == body);
      }
      break;
    }
    case MsgType::kDirPut:
    case MsgType::kDirDel: {
      DirUpdateRequest r;
      if (DecodeDirUpdateRequest(body, &r).ok()) {
        (void)ParseHostPort(r.holder);
        Check(EncodeDirUpdateRequest(r) == body);
      }
      break;
    }
  }
}

void FuzzResponse(MsgType type, std::string_view body, size_t n) {
  switch (type) {
    case MsgType::kHello: {
      HelloResponse r;
      if (DecodeHelloResponse(body, &r).ok()) Check(EncodeHelloResponse(r) == body);
      break;
    }
    case MsgType::kExist:
    case MsgType::kPutSeal:
    case MsgType::kSoftPin: {
      std::vector<uint8_t> codes;
      if (DecodeCodes(body, n, &codes).ok()) Check(codes.size() == n && EncodeCodes(codes) == body);
      break;
    }
    case MsgType::kPutAlloc: {
      std::vector<PutAllocAnswer> answers;
      if (DecodePutAllocResponse(body, n, &answers).ok())
        Check(answers.size() == n && EncodePutAllocResponse(answers) == body);
      break;
    }
    case MsgType::kGet: {
      std::vector<GetAnswer> answers;
      if (DecodeGetResponse(body, n, &answers).ok())
        Check(answers.size() == n && EncodeGetResponse(answers) == body);
      break;
    }
    case MsgType::kDirLookup: {
      std::vector<std::string> holders;
      if (DecodeDirLookupResponse(body, n, &holders).ok())
        Check(holders.size() == n && EncodeDirLookupResponse(holders) == body);
      break;
    }
    case MsgType::kFetch: {
      std::vector<std::optional<std::string_view>> objects;
      if (DecodeFetchResponse(body, n, &objects).ok()) {
        Check(objects.size() == n);
        std::string again;
        for (const auto& o : objects) {
          again += EncodeFetchHead(o ? std::optional<uint32_t>(o->size()) : std::nullopt);
          if (o) {
            Check(o->data() >= body.data() && o->data() + o->size() <= body.data() + body.size());
            again += *o;
          }
        }
        // Like PUT_SEAL's commit, any non-zero `found` byte means found: compare what the
        // canonical encoding decodes to.
        Check(again.size() == body.size());
        std::vector<std::optional<std::string_view>> reread;
        Check(DecodeFetchResponse(again, n, &reread).ok() && reread == objects);
      }
      break;
    }
    case MsgType::kRelease:
    case MsgType::kDirPut:
    case MsgType::kDirDel:
      break;  // empty answers
  }
}

void FuzzBody(const FrameHeader& header, std::string_view body, size_t n) {
  FuzzRequest(header.type, body);
  // A response either carries a status message or the type's answer body.
  Status status = StatusFromResponse(header, body);
  if (!status.ok()) {
    Check(status.message().size() <= 4096 + 64);
    return;
  }
  FuzzResponse(header.type, body, n);
  // The count a well-formed answer of this size would have, so the decoders also see
  // bodies whose count matches.
  for (size_t answer_bytes : {1, 9, 17})
    FuzzResponse(header.type, body, body.size() / answer_bytes);
}

void FuzzFrameStream(std::string_view stream, size_t n) {
  while (stream.size() >= kHeaderBytes) {
    FrameHeader header;
    Status st = DecodeHeader(reinterpret_cast<const uint8_t*>(stream.data()), &header);
    if (!st.ok()) {
      Check(st.code() == StatusCode::kInvalidArgument);
      // Skip one byte so streams with junk in front still reach later frames.
      stream.remove_prefix(1);
      continue;
    }
    Check(header.body_len <= kMaxBodyBytes);
    stream.remove_prefix(kHeaderBytes);
    std::string_view body = stream.substr(0, header.body_len);
    FuzzBody(header, body, n);
    stream.remove_prefix(body.size());
  }
}

// What RecvFrame makes of a peer that sent `bytes` and closed its side.
void FuzzRecvFrame(std::string_view bytes, size_t n) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return;
  net::SocketConnection reader{UniqueFd(fds[0])};
  UniqueFd writer(fds[1]);
  // The whole input fits in the socket buffer (the fuzzer's -max_len is far smaller), so
  // writing before reading cannot block.
  int buffer_bytes = 1 << 20;
  setsockopt(writer.get(), SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof(buffer_bytes));
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t w = ::send(writer.get(), bytes.data() + written, bytes.size() - written,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w <= 0) break;
    written += static_cast<size_t>(w);
  }
  writer.Reset();  // EOF after the bytes
  (void)reader.SetIoTimeout(std::chrono::milliseconds(1000));
  for (int frames = 0; frames < 64; ++frames) {
    FrameHeader header;
    std::string body;
    UniqueFd passed;
    Status st = RecvFrame(reader, &header, &body, &passed, kMaxRequestBytes);
    if (!st.ok()) {
      Check(st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kUnavailable);
      break;
    }
    Check(body.size() == header.body_len && body.size() <= kMaxRequestBytes);
    FuzzBody(header, body, n);
  }
}

}  // namespace
}  // namespace tandem::pool

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0] % 2;
  const size_t n = data[1];
  std::string_view payload(reinterpret_cast<const char*>(data + 2), size - 2);
  if (mode == 0) {
    tandem::pool::FuzzFrameStream(payload, n);
  } else {
    tandem::pool::FuzzRecvFrame(payload, n);
  }
  return 0;
}
