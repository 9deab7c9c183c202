#include "grammar/regex_compiler.h"

#include <string>
#include <utility>

#include "common/utf8.h"

namespace tandem::grammar {
namespace {

constexpr int kMaxRepeat = 1000;

std::vector<CodeRange> DigitRanges() { return {{'0', '9'}}; }
std::vector<CodeRange> WordRanges() { return {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}}; }
std::vector<CodeRange> SpaceRanges() { return {{' ', ' '}, {'\t', '\r'}}; }

class RegexParser {
 public:
  RegexParser(std::string_view p, const RegexOptions& o) : p_(p), options_(o) {}

  StatusOr<RegexExpr> Parse() {
    RegexExpr out;
    if (!p_.empty() && p_[0] == '^') {
      out.anchored_start = true;
      ++i_;
    }
    TANDEM_ASSIGN_OR_RETURN(out.expr, ParseAlt());
    if (i_ < p_.size()) return Error("unbalanced ')'");
    out.anchored_end = end_anchor_;
    return out;
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgumentError("invalid regex at offset " + std::to_string(i_) + ": " + what);
  }
  bool AtEnd() const { return i_ >= p_.size(); }

  StatusOr<Expr> ParseAlt() {
    std::vector<Expr> alts;
    while (true) {
      TANDEM_ASSIGN_OR_RETURN(Expr seq, ParseSeq());
      alts.push_back(std::move(seq));
      if (AtEnd() || p_[i_] != '|') break;
      ++i_;
    }
    return Expr::Alt(std::move(alts));
  }

  StatusOr<Expr> ParseSeq() {
    std::vector<Expr> items;
    while (!AtEnd() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$') {
        if (i_ + 1 != p_.size()) return Error("'$' is only supported at the end of the pattern");
        end_anchor_ = true;
        ++i_;
        break;
      }
      if (p_[i_] == '^') return Error("'^' is only supported at the start of the pattern");
      TANDEM_ASSIGN_OR_RETURN(Expr atom, ParseAtom());
      TANDEM_ASSIGN_OR_RETURN(atom, ParseQuantifiers(std::move(atom)));
      items.push_back(std::move(atom));
    }
    return Expr::Seq(std::move(items));
  }

  StatusOr<Expr> ParseQuantifiers(Expr atom) {
    while (!AtEnd()) {
      const char c = p_[i_];
      int min = 0, max = kUnbounded;
      if (c == '*') {
        ++i_;
      } else if (c == '+') {
        min = 1;
        ++i_;
      } else if (c == '?') {
        max = 1;
        ++i_;
      } else if (c == '{' && i_ + 1 < p_.size() && isdigit(static_cast<unsigned char>(p_[i_ + 1]))) {
        ++i_;
        min = ReadInt();
        max = min;
        if (!AtEnd() && p_[i_] == ',') {
          ++i_;
          max = (!AtEnd() && isdigit(static_cast<unsigned char>(p_[i_]))) ? ReadInt() : kUnbounded;
        }
        if (AtEnd() || p_[i_] != '}') return Error("malformed {n,m} quantifier");
        ++i_;
        if (min > kMaxRepeat || max > kMaxRepeat) return Error("a repetition count above " + std::to_string(kMaxRepeat));
        if (max != kUnbounded && max < min) return Error("{n,m} with m < n");
      } else {
        break;
      }
      if (!AtEnd() && (p_[i_] == '?' || p_[i_] == '+')) ++i_;  // lazy / possessive: same language
      atom = Expr::Repeat(std::move(atom), min, max);
    }
    return atom;
  }

  int ReadInt() {
    int v = 0;
    while (!AtEnd() && isdigit(static_cast<unsigned char>(p_[i_]))) v = std::min(v * 10 + (p_[i_++] - '0'), 1 << 20);
    return v;
  }

  // One code point of the pattern (UTF-8).
  uint32_t ReadCodePoint() {
    const unsigned char c = p_[i_];
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    ++i_;
    for (int k = 1; k < n && !AtEnd(); ++k) cp = (cp << 6) | (p_[i_++] & 0x3F);
    return cp;
  }

  // The character class for a code point set, restricted to JSON-safe characters in
  // json_string mode.
  Expr ClassExpr(std::vector<CodeRange> ranges, bool negated) {
    std::vector<CodeRange> r = NormalizeRanges(std::move(ranges), negated);
    if (options_.json_string) {
      std::vector<CodeRange> unsafe = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
      std::vector<CodeRange> safe = NormalizeRanges(unsafe, true);
      std::vector<CodeRange> both;
      for (const CodeRange& a : r) {
        for (const CodeRange& b : safe) {
          uint32_t lo = std::max(a.first, b.first), hi = std::min(a.second, b.second);
          if (lo <= hi) both.emplace_back(lo, hi);
        }
      }
      r = both;
    }
    return Expr::Class(std::move(r));
  }

  Expr CharExpr(uint32_t cp) {
    if (options_.json_string) {
      if (cp == '"') return Expr::Lit("\\\"");
      if (cp == '\\') return Expr::Lit("\\\\");
      if (cp == '\n') return Expr::Lit("\\n");
      if (cp == '\t') return Expr::Lit("\\t");
      if (cp == '\r') return Expr::Lit("\\r");
      if (cp < 0x20) {
        static const char* hex = "0123456789abcdef";
        return Expr::Lit(std::string("\\u00") + hex[cp >> 4] + hex[cp & 15]);
      }
    }
    std::string bytes;
    AppendUtf8(cp, &bytes);
    return Expr::Lit(std::move(bytes));
  }

  // After a backslash: a class escape fills `ranges`/`negated` and returns true; a
  // literal escape sets `cp`.
  StatusOr<bool> ParseEscape(std::vector<CodeRange>* ranges, bool* negated, uint32_t* cp) {
    if (AtEnd()) return Error("trailing backslash");
    const char c = p_[i_++];
    *negated = false;
    switch (c) {
      case 'd': *ranges = DigitRanges(); return true;
      case 'D': *ranges = DigitRanges(); *negated = true; return true;
      case 'w': *ranges = WordRanges(); return true;
      case 'W': *ranges = WordRanges(); *negated = true; return true;
      case 's': *ranges = SpaceRanges(); return true;
      case 'S': *ranges = SpaceRanges(); *negated = true; return true;
      case 'n': *cp = '\n'; return false;
      case 'r': *cp = '\r'; return false;
      case 't': *cp = '\t'; return false;
      case 'f': *cp = '\f'; return false;
      case 'v': *cp = '\v'; return false;
      case '0': *cp = 0; return false;
      case 'x':
      case 'u': {
        const int n = c == 'x' ? 2 : 4;
        if (i_ + n > p_.size()) return Error(std::string("short \\") + c + " escape");
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
          const char h = p_[i_++];
          if (!isxdigit(static_cast<unsigned char>(h))) return Error(std::string("bad \\") + c + " escape");
          v = v * 16 + (isdigit(static_cast<unsigned char>(h)) ? h - '0' : (tolower(h) - 'a' + 10));
        }
        *cp = v;
        return false;
      }
      case 'b':
      case 'B':
        return Error(std::string("\\") + c + " (word boundary) is not supported");
      default:
        if (isdigit(static_cast<unsigned char>(c))) return Error("backreferences are not supported");
        if (isalpha(static_cast<unsigned char>(c))) return Error(std::string("unknown escape \\") + c);
        --i_;
        *cp = ReadCodePoint();
        return false;
    }
  }

  StatusOr<Expr> ParseClass() {
    ++i_;  // '['
    bool negated = false;
    if (!AtEnd() && p_[i_] == '^') {
      negated = true;
      ++i_;
    }
    std::vector<CodeRange> ranges;
    bool first = true;
    while (true) {
      if (AtEnd()) return Error("unterminated character class");
      if (p_[i_] == ']' && !first) break;
      first = false;
      uint32_t lo;
      if (p_[i_] == '\\') {
        ++i_;
        std::vector<CodeRange> cls;
        bool neg;
        TANDEM_ASSIGN_OR_RETURN(bool is_class, ParseEscape(&cls, &neg, &lo));
        if (is_class) {
          for (const CodeRange& r : NormalizeRanges(cls, neg)) ranges.push_back(r);
          continue;
        }
      } else {
        lo = ReadCodePoint();
      }
      uint32_t hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (p_[i_] == '\\') {
          ++i_;
          std::vector<CodeRange> cls;
          bool neg;
          TANDEM_ASSIGN_OR_RETURN(bool is_class, ParseEscape(&cls, &neg, &hi));
          if (is_class) return Error("a class escape cannot end a range");
        } else {
          hi = ReadCodePoint();
        }
        if (hi < lo) return Error("range out of order in character class");
      }
      ranges.emplace_back(lo, hi);
    }
    ++i_;  // ']'
    return ClassExpr(std::move(ranges), negated);
  }

  StatusOr<Expr> ParseAtom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (!AtEnd() && p_[i_] == '?') {
        ++i_;
        if (!AtEnd() && p_[i_] == ':') {
          ++i_;
        } else if (!AtEnd() && (p_[i_] == '<' || p_[i_] == 'P')) {
          if (p_[i_] == 'P') ++i_;
          if (AtEnd() || p_[i_] != '<') return Error("unsupported group syntax");
          if (i_ + 1 < p_.size() && (p_[i_ + 1] == '=' || p_[i_ + 1] == '!')) return Error("lookbehind is not supported");
          const size_t close = p_.find('>', i_);
          if (close == std::string_view::npos) return Error("unterminated group name");
          i_ = close + 1;
        } else {
          return Error("lookaround and inline flags are not supported");
        }
      }
      TANDEM_ASSIGN_OR_RETURN(Expr inner, ParseAlt());
      if (AtEnd() || p_[i_] != ')') return Error("missing ')'");
      ++i_;
      return inner;
    }
    if (c == ')') return Error("unbalanced ')'");
    if (c == '*' || c == '+' || c == '?') return Error("nothing to repeat");
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++i_;
      return ClassExpr({{'\n', '\n'}}, true);
    }
    if (c == '\\') {
      ++i_;
      std::vector<CodeRange> cls;
      bool neg;
      uint32_t cp;
      TANDEM_ASSIGN_OR_RETURN(bool is_class, ParseEscape(&cls, &neg, &cp));
      if (is_class) return ClassExpr(std::move(cls), neg);
      return CharExpr(cp);
    }
    return CharExpr(ReadCodePoint());
  }

  std::string_view p_;
  const RegexOptions& options_;
  size_t i_ = 0;
  bool end_anchor_ = false;
};

}  // namespace

StatusOr<RegexExpr> CompileRegex(std::string_view pattern, const RegexOptions& options) {
  return RegexParser(pattern, options).Parse();
}

}  // namespace tandem::grammar
