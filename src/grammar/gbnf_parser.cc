#include "grammar/gbnf_parser.h"

#include <string>

#include "common/utf8.h"

namespace tandem::grammar {
namespace {

bool IsNameChar(char c) { return isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view t) : t_(t) {}

  StatusOr<Grammar> Parse() {
    SkipSpace(true);
    if (AtEnd()) return Error("the grammar is empty");
    while (!AtEnd()) {
      const std::string name = ReadName();
      if (name.empty()) return Error("expected a rule name");
      SkipSpace(false);
      if (t_.substr(i_, 3) != "::=") return Error("expected '::=' after '" + name + "'");
      i_ += 3;
      const int rule = b_.Declare(name);
      if (b_.IsDefined(rule)) return Error("rule '" + name + "' is defined twice");
      TANDEM_ASSIGN_OR_RETURN(Expr body, ParseAlt(0));
      b_.Define(rule, std::move(body));
      SkipSpace(true);
    }
    return std::move(b_).Build("root");
  }

 private:
  bool AtEnd() const { return i_ >= t_.size(); }
  Status Error(const std::string& what) const {
    int line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) {
      if (t_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return InvalidArgumentError("grammar syntax error at line " + std::to_string(line) + ", column " +
                                std::to_string(col) + ": " + what);
  }

  // Skips blanks and comments; newlines only when `newlines` (inside groups, or between
  // rules).
  void SkipSpace(bool newlines) {
    while (!AtEnd()) {
      const char c = t_[i_];
      if (c == '#') {
        while (!AtEnd() && t_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else {
        break;
      }
    }
  }

  std::string ReadName() {
    const size_t start = i_;
    while (!AtEnd() && IsNameChar(t_[i_])) ++i_;
    return std::string(t_.substr(start, i_ - start));
  }

  // True when a new rule definition starts at the current position (`name ::=`).
  bool AtRuleStart() const {
    size_t k = i_;
    while (k < t_.size() && IsNameChar(t_[k])) ++k;
    if (k == i_) return false;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t')) ++k;
    return t_.substr(k, 3) == "::=";
  }

  // Inside a group a body continues across newlines; at the top level only onto a line
  // starting with '|'.
  void SkipSpaceInBody(int depth) {
    while (true) {
      SkipSpace(depth > 0);
      if (AtEnd() || t_[i_] != '\n') return;
      size_t save = i_;
      ++i_;
      SkipSpace(true);
      // At the top level a rule ends at a newline unless the next line continues it
      // with '|' (llama.cpp's rule).
      if (AtEnd() || AtRuleStart() || (depth == 0 && t_[i_] != '|')) {
        i_ = save;
        return;
      }
    }
  }

  StatusOr<Expr> ParseAlt(int depth) {
    std::vector<Expr> alts;
    while (true) {
      TANDEM_ASSIGN_OR_RETURN(Expr seq, ParseSeq(depth));
      alts.push_back(std::move(seq));
      SkipSpaceInBody(depth);
      if (AtEnd() || t_[i_] != '|') break;
      ++i_;
    }
    return Expr::Alt(std::move(alts));
  }

  StatusOr<Expr> ParseSeq(int depth) {
    std::vector<Expr> items;
    while (true) {
      SkipSpaceInBody(depth);
      if (AtEnd() || t_[i_] == '|' || t_[i_] == ')' || t_[i_] == '\n' || AtRuleStart()) break;
      TANDEM_ASSIGN_OR_RETURN(Expr atom, ParseAtom(depth));
      TANDEM_ASSIGN_OR_RETURN(atom, ParseQuantifier(std::move(atom)));
      items.push_back(std::move(atom));
    }
    return Expr::Seq(std::move(items));
  }

  StatusOr<Expr> ParseQuantifier(Expr atom) {
    while (!AtEnd()) {
      const char c = t_[i_];
      if (c == '*' || c == '+' || c == '?') {
        ++i_;
        atom = c == '*' ? Expr::Star(std::move(atom)) : c == '+' ? Expr::Plus(std::move(atom)) : Expr::Opt(std::move(atom));
      } else if (c == '{') {
        ++i_;
        SkipSpace(false);
        int min = ReadInt(), max = min;
        if (min < 0) return Error("expected a number after '{'");
        SkipSpace(false);
        if (!AtEnd() && t_[i_] == ',') {
          ++i_;
          SkipSpace(false);
          max = (!AtEnd() && isdigit(static_cast<unsigned char>(t_[i_]))) ? ReadInt() : kUnbounded;
          SkipSpace(false);
        }
        if (AtEnd() || t_[i_] != '}') return Error("expected '}'");
        ++i_;
        if (max != kUnbounded && max < min) return Error("{m,n} with n < m");
        if (min > 1000 || max > 1000) return Error("repetition counts above 1000");
        atom = Expr::Repeat(std::move(atom), min, max);
      } else {
        break;
      }
    }
    return atom;
  }

  int ReadInt() {
    if (AtEnd() || !isdigit(static_cast<unsigned char>(t_[i_]))) return -1;
    int v = 0;
    while (!AtEnd() && isdigit(static_cast<unsigned char>(t_[i_]))) v = std::min(v * 10 + (t_[i_++] - '0'), 1 << 20);
    return v;
  }

  uint32_t ReadCodePoint() {
    const unsigned char c = t_[i_];
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    ++i_;
    for (int k = 1; k < n && !AtEnd(); ++k) cp = (cp << 6) | (t_[i_++] & 0x3F);
    return cp;
  }

  StatusOr<uint32_t> ReadChar() {
    if (AtEnd()) return Error("unexpected end of grammar");
    if (t_[i_] != '\\') return ReadCodePoint();
    ++i_;
    if (AtEnd()) return Error("trailing backslash");
    const char c = t_[i_++];
    int hex = 0;
    switch (c) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': return static_cast<uint32_t>(c);
      case 'x': hex = 2; break;
      case 'u': hex = 4; break;
      case 'U': hex = 8; break;
      default: return Error(std::string("unknown escape \\") + c);
    }
    uint32_t v = 0;
    for (int k = 0; k < hex; ++k) {
      if (AtEnd() || !isxdigit(static_cast<unsigned char>(t_[i_]))) return Error("malformed hex escape");
      const char h = t_[i_++];
      v = v * 16 + (isdigit(static_cast<unsigned char>(h)) ? h - '0' : tolower(h) - 'a' + 10);
    }
    if (v > kMaxCodePoint) return Error("code point out of range");
    return v;
  }

  StatusOr<Expr> ParseAtom(int depth) {
    const char c = t_[i_];
    if (c == '"') {
      ++i_;
      std::string bytes;
      while (!AtEnd() && t_[i_] != '"') {
        if (t_[i_] == '\n') return Error("newline in a string literal");
        TANDEM_ASSIGN_OR_RETURN(uint32_t cp, ReadChar());
        AppendUtf8(cp, &bytes);
      }
      if (AtEnd()) return Error("unterminated string literal");
      ++i_;
      return Expr::Lit(std::move(bytes));
    }
    if (c == '[') {
      ++i_;
      bool negated = false;
      if (!AtEnd() && t_[i_] == '^') {
        negated = true;
        ++i_;
      }
      std::vector<CodeRange> ranges;
      while (!AtEnd() && t_[i_] != ']') {
        TANDEM_ASSIGN_OR_RETURN(uint32_t lo, ReadChar());
        uint32_t hi = lo;
        if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
          ++i_;
          TANDEM_ASSIGN_OR_RETURN(hi, ReadChar());
          if (hi < lo) return Error("character range out of order");
        }
        ranges.emplace_back(lo, hi);
      }
      if (AtEnd()) return Error("unterminated character class");
      ++i_;
      return Expr::Class(std::move(ranges), negated);
    }
    if (c == '(') {
      ++i_;
      TANDEM_ASSIGN_OR_RETURN(Expr inner, ParseAlt(depth + 1));
      SkipSpace(true);
      if (AtEnd() || t_[i_] != ')') return Error("expected ')'");
      ++i_;
      return inner;
    }
    if (c == '.') {
      ++i_;
      return Expr::Class({}, true);
    }
    if (c == '<') return Error("token references (<[id]>) are not supported");
    if (IsNameChar(c)) return Expr::Ref(b_.Declare(ReadName()));
    return Error(std::string("unexpected character '") + c + "'");
  }

  std::string_view t_;
  size_t i_ = 0;
  GrammarBuilder b_;
};

}  // namespace

StatusOr<Grammar> ParseGbnf(std::string_view text) { return GbnfParser(text).Parse(); }

}  // namespace tandem::grammar
