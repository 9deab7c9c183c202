#include "template/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>

#include "common/utf8.h"
#include "template/jinja_value.h"

namespace tandem::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python str.rstrip() for the whitespace a template contains.
void RStripWhitespace(std::string* s) {
  while (!s->empty() && IsSpace(s->back())) s->pop_back();
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t open = FindTagOpen(pos_);
      if (open == std::string::npos) {
        EmitText(src_.substr(pos_), pos_);
        break;
      }
      std::string text = src_.substr(pos_, open - pos_);
      char kind = src_[open + 1];
      char flag = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (flag != '-' && flag != '+') flag = '\0';
      size_t raw_body = kind == '%' ? MatchRawBegin(open) : std::string::npos;
      ApplyLeftWhitespace(&text, flag, kind != '{', line_starting);
      EmitText(std::move(text), pos_);
      size_t after_open = open + 2 + (flag != '\0' ? 1 : 0);
      if (raw_body != std::string::npos) {
        TANDEM_RETURN_IF_ERROR(LexRaw(raw_body, &line_starting));
      } else if (kind == '#') {
        TANDEM_RETURN_IF_ERROR(LexComment(open, after_open, &line_starting));
      } else {
        TANDEM_RETURN_IF_ERROR(LexTag(kind, open, after_open, &line_starting));
      }
    }
    Token eof;
    eof.type = TokenType::kEof;
    eof.line = LineAt(src_.size());
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  size_t FindTagOpen(size_t from) const {
    size_t p = src_.find('{', from);
    while (p != std::string::npos && p + 1 < src_.size()) {
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      p = src_.find('{', p + 1);
    }
    return std::string::npos;
  }

  int LineAt(size_t pos) {
    for (; line_pos_ < pos && line_pos_ < src_.size(); ++line_pos_) {
      if (src_[line_pos_] == '\n') ++line_;
    }
    return line_;
  }

  Status Error(size_t pos, const std::string& message) {
    return InvalidArgumentError("template line " + std::to_string(LineAt(pos)) + ": " + message);
  }

  void ApplyLeftWhitespace(std::string* text, char flag, bool is_block_or_comment, bool line_starting) {
    if (flag == '-') {
      RStripWhitespace(text);
      return;
    }
    if (flag == '+' || !is_block_or_comment) return;
    size_t l_pos = text->rfind('\n');
    l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
    if (l_pos == 0 && !line_starting) return;
    for (size_t i = l_pos; i < text->size(); ++i) {
      if ((*text)[i] != ' ' && (*text)[i] != '\t') return;
    }
    text->resize(l_pos);
  }

  void EmitText(std::string text, size_t pos) {
    if (text.empty()) return;
    Token t;
    t.type = TokenType::kText;
    t.text = std::move(text);
    t.line = LineAt(pos);
    tokens_.push_back(std::move(t));
  }

  void Emit(TokenType type, size_t pos, std::string text = {}) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = LineAt(pos);
    tokens_.push_back(std::move(t));
  }

  size_t SkipSpaces(size_t p) const {
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    return p;
  }

  // `{%[-+]? raw [-]?%}`: returns the offset just past the tag, or npos.
  size_t MatchRawBegin(size_t open) const {
    size_t p = open + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = SkipSpaces(p);
    if (src_.compare(p, 3, "raw") != 0) return std::string::npos;
    p = SkipSpaces(p + 3);
    if (src_.compare(p, 3, "-%}") == 0) return SkipSpaces(p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  Status LexRaw(size_t body, bool* line_starting) {
    size_t p = body;
    while (true) {
      size_t open = src_.find("{%", p);
      if (open == std::string::npos) return Error(body, "missing {% endraw %}");
      size_t q = open + 2;
      char flag = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : '\0';
      if (flag != '\0') ++q;
      q = SkipSpaces(q);
      if (src_.compare(q, 6, "endraw") != 0) {
        p = open + 2;
        continue;
      }
      q = SkipSpaces(q + 6);
      size_t end;
      if (src_.compare(q, 3, "-%}") == 0) {
        end = SkipSpaces(q + 3);
      } else if (src_.compare(q, 3, "+%}") == 0) {
        end = q + 3;
      } else if (src_.compare(q, 2, "%}") == 0) {
        end = q + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      } else {
        p = open + 2;
        continue;
      }
      std::string text = src_.substr(body, open - body);
      ApplyLeftWhitespace(&text, flag, true, false);
      EmitText(std::move(text), body);
      *line_starting = end > 0 && src_[end - 1] == '\n';
      pos_ = end;
      return Status::Ok();
    }
  }

  Status LexComment(size_t open, size_t after_open, bool* line_starting) {
    size_t close = src_.find("#}", after_open);
    if (close == std::string::npos) return Error(open, "missing end of comment tag");
    size_t marker_end = close + 2;
    size_t end = marker_end;
    char before = close > after_open ? src_[close - 1] : '\0';
    if (before == '-') {
      end = SkipSpaces(end);
    } else if (before != '+' && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    *line_starting = end > marker_end && src_[end - 1] == '\n';
    pos_ = end;
    return Status::Ok();
  }

  Status LexTag(char kind, size_t open, size_t after_open, bool* line_starting) {
    bool is_var = kind == '{';
    Emit(is_var ? TokenType::kVarBegin : TokenType::kBlockBegin, open);
    size_t p = after_open;
    int balance = 0;
    while (true) {
      p = SkipSpaces(p);
      if (p >= src_.size()) return Error(open, is_var ? "missing '}}'" : "missing '%}'");
      if (balance == 0) {
        size_t marker_end = std::string::npos;
        size_t end = 0;
        if (is_var) {
          if (src_.compare(p, 3, "-}}") == 0) {
            marker_end = p + 3;
            end = SkipSpaces(marker_end);
          } else if (src_.compare(p, 2, "}}") == 0) {
            marker_end = end = p + 2;
          }
        } else if (src_.compare(p, 3, "-%}") == 0) {
          marker_end = p + 3;
          end = SkipSpaces(marker_end);
        } else if (src_.compare(p, 3, "+%}") == 0) {
          marker_end = end = p + 3;
        } else if (src_.compare(p, 2, "%}") == 0) {
          marker_end = end = p + 2;
          if (end < src_.size() && src_[end] == '\n') ++end;
        }
        if (marker_end != std::string::npos) {
          Emit(is_var ? TokenType::kVarEnd : TokenType::kBlockEnd, p);
          *line_starting = end > marker_end && src_[end - 1] == '\n';
          pos_ = end;
          return Status::Ok();
        }
      }
      char c = src_[p];
      if (c == '\'' || c == '"') {
        TANDEM_ASSIGN_OR_RETURN(p, LexString(p));
      } else if (IsDigit(c)) {
        TANDEM_ASSIGN_OR_RETURN(p, LexNumber(p));
      } else if (IsNameStart(c)) {
        size_t q = p;
        while (q < src_.size() && IsNameChar(src_[q])) ++q;
        Emit(TokenType::kName, p, src_.substr(p, q - p));
        p = q;
      } else {
        static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (std::string_view two : kTwoChar) {
          if (src_.compare(p, 2, two) == 0) op = std::string(two);
        }
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
            return Error(p, std::string("unexpected character '") + c + "'");
          }
          op = std::string(1, c);
          if (c == '(' || c == '[' || c == '{') ++balance;
          if (c == ')' || c == ']' || c == '}') {
            if (balance == 0) return Error(p, std::string("unexpected '") + c + "'");
            --balance;
          }
        }
        Emit(TokenType::kOp, p, op);
        p += op.size();
      }
    }
  }

  StatusOr<size_t> LexString(size_t start) {
    char quote = src_[start];
    std::string out;
    size_t p = start + 1;
    while (true) {
      if (p >= src_.size()) return Error(start, "unterminated string literal");
      char c = src_[p];
      if (c == quote) break;
      if (c != '\\' || p + 1 >= src_.size()) {
        out.push_back(c);
        ++p;
        continue;
      }
      char e = src_[p + 1];
      p += 2;
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x':
        case 'u':
        case 'U': {
          int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t cp = 0;
          for (int i = 0; i < digits; ++i) {
            int h = p < src_.size() ? HexValue(src_[p]) : -1;
            if (h < 0) return Error(start, "truncated \\" + std::string(1, e) + " escape in string");
            cp = cp * 16 + static_cast<char32_t>(h);
            ++p;
          }
          if (cp > 0x10ffff) return Error(start, "invalid \\U escape in string");
          AppendUtf8(cp, &out);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i, ++p) {
              cp = cp * 8 + static_cast<char32_t>(src_[p] - '0');
            }
            AppendUtf8(cp, &out);
          } else {
            out.push_back('\\');  // Python keeps unknown escapes verbatim
            out.push_back(e);
          }
      }
    }
    Emit(TokenType::kString, start, std::move(out));
    return p + 1;
  }

  StatusOr<size_t> LexNumber(size_t start) {
    size_t p = start;
    auto digits = [&]() {
      while (p < src_.size() && (IsDigit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && IsDigit(src_[p + 1])))) ++p;
    };
    digits();
    bool is_float = false;
    bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::kOp && tokens_.back().text == ".";
    if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && IsDigit(src_[p + 1])) {
      is_float = true;
      ++p;
      digits();
    }
    if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && IsDigit(src_[q])) {
        is_float = true;
        p = q;
        digits();
      }
    }
    std::string text;
    for (size_t i = start; i < p; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token t;
    t.line = LineAt(start);
    errno = 0;
    if (is_float) {
      t.type = TokenType::kFloat;
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      t.type = TokenType::kInt;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return Error(start, "integer literal too large");
    }
    tokens_.push_back(std::move(t));
    return p;
  }

  std::string src_;
  size_t pos_ = 0;
  size_t line_pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  std::string normalized;
  normalized.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      normalized.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      normalized.push_back(source[i]);
    }
  }
  if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  return Lexer(std::move(normalized)).Run();
}

}  // namespace tandem::jinja
