#include "net/url.h"

#include <charconv>

namespace tandem::net {

std::string HttpUrl::HostPort() const {
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return out + ":" + std::to_string(port);
}

StatusOr<HttpUrl> ParseHttpUrl(std::string_view url) {
  std::string_view rest = url;
  size_t scheme_end = rest.find("://");
  if (scheme_end != std::string_view::npos) {
    std::string_view scheme = rest.substr(0, scheme_end);
    if (scheme == "https") return UnimplementedError("https is not supported: " + std::string(url));
    if (scheme != "http") return InvalidArgumentError("not an http URL: " + std::string(url));
    rest.remove_prefix(scheme_end + 3);
  }
  HttpUrl out;
  size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    out.target = std::string(rest.substr(slash));
    if (out.target.front() == '?') out.target.insert(0, "/");
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgumentError("unterminated IPv6 literal in URL: " + std::string(url));
    }
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgumentError("bad URL authority: " + std::string(url));
      port_text = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return InvalidArgumentError("URL has no host: " + std::string(url));
  if (!port_text.empty()) {
    unsigned port = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      return InvalidArgumentError("bad port in URL: " + std::string(url));
    }
    out.port = static_cast<uint16_t>(port);
  }
  return out;
}

}  // namespace tandem::net
