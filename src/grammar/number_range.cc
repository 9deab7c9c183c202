#include "grammar/number_range.h"

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

namespace tandem::grammar {

Expr Digits(int min, int max) { return Expr::Repeat(Expr::Class({{'0', '9'}}), min, max); }

namespace {

// Decimal integers in [lo, hi] with lo, hi >= 0, both of `len` digits (a leading zero
// allowed only when len == 1).
Expr SameLength(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return Expr::Empty();
  if (lo == hi) return Expr::Lit(lo);
  const std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
  const size_t n = rest_lo.size();
  if (lo[0] == hi[0]) return Expr::Seq({Expr::Lit(lo.substr(0, 1)), SameLength(rest_lo, rest_hi)});
  std::vector<Expr> alts;
  const bool lo_full = rest_lo == std::string(n, '0');
  const bool hi_full = rest_hi == std::string(n, '9');
  const char first_mid = lo_full ? lo[0] : static_cast<char>(lo[0] + 1);
  const char last_mid = hi_full ? hi[0] : static_cast<char>(hi[0] - 1);
  if (!lo_full) alts.push_back(Expr::Seq({Expr::Lit(lo.substr(0, 1)), SameLength(rest_lo, std::string(n, '9'))}));
  if (first_mid <= last_mid) {
    alts.push_back(Expr::Seq({Expr::Class({{static_cast<uint32_t>(first_mid), static_cast<uint32_t>(last_mid)}}),
                              Digits(static_cast<int>(n), static_cast<int>(n))}));
  }
  if (!hi_full) alts.push_back(Expr::Seq({Expr::Lit(hi.substr(0, 1)), SameLength(std::string(n, '0'), rest_hi)}));
  return Expr::Alt(std::move(alts));
}

}  // namespace

// Non-negative integers in [lo, hi] (hi < 0: unbounded), no leading zeros.
Expr NonNegativeRange(int64_t lo, int64_t hi) {
  const std::string los = std::to_string(lo);
  std::vector<Expr> alts;
  const int max_len = hi < 0 ? kMaxDigits : static_cast<int>(std::to_string(hi).size());
  for (int len = static_cast<int>(los.size()); len <= max_len; ++len) {
    const int64_t floor = len == 1 ? 0 : static_cast<int64_t>(std::pow(10, len - 1));
    const int64_t ceil = static_cast<int64_t>(std::pow(10, len)) - 1;
    const int64_t a = std::max(lo, floor);
    const int64_t b = hi < 0 ? ceil : std::min(hi, ceil);
    if (a > b) continue;
    if (hi < 0 && a == floor && len > 1) {
      // Every longer length is complete too: [1-9][0-9]{len-1, max-1}.
      alts.push_back(Expr::Seq({Expr::Class({{'1', '9'}}), Digits(len - 1, kMaxDigits - 1)}));
      break;
    }
    alts.push_back(SameLength(std::to_string(a), std::to_string(b)));
  }
  return Expr::Alt(std::move(alts));
}


namespace {

// A non-negative decimal: integer part and fraction digits (no trailing zeros).
struct Decimal {
  int64_t integer = 0;
  std::string fraction;
};

// |v| as the shortest decimal that reads back as v.
Decimal ToDecimal(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), std::fabs(v), std::chars_format::fixed);
  std::string s(buf, ec == std::errc() ? end : buf);
  Decimal d;
  const size_t dot = s.find('.');
  d.integer = std::stoll(s.substr(0, dot));
  if (dot != std::string::npos) d.fraction = s.substr(dot + 1);
  while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
  return d;
}

bool Less(const Decimal& a, const Decimal& b) {
  if (a.integer != b.integer) return a.integer < b.integer;
  return a.fraction < b.fraction;  // no trailing zeros: lexicographic is numeric
}

Expr AnyDigits() { return Digits(0, kMaxDigits); }

Expr DigitClass(char lo, char hi) { return Expr::Class({{static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)}}); }

// Digit strings D (possibly empty, at most kMaxDigits - depth long) with 0.D >= 0.A
// (> when strict). nullopt: none.
std::optional<Expr> FracAtLeast(const std::string& a, bool strict, bool allow_empty) {
  if (a.empty()) {
    // 0.D >= 0 always; 0.D > 0 needs a non-zero digit.
    if (!strict) return allow_empty ? AnyDigits() : Digits(1, kMaxDigits);
    return Expr::Seq({Expr::Repeat(DigitClass('0', '0'), 0, kMaxDigits - 1), DigitClass('1', '9'),
                      Digits(0, kMaxDigits - 1)});
  }
  std::vector<Expr> alts;
  if (a[0] < '9') alts.push_back(Expr::Seq({DigitClass(static_cast<char>(a[0] + 1), '9'), AnyDigits()}));
  if (std::optional<Expr> rest = FracAtLeast(a.substr(1), strict, true)) {
    alts.push_back(Expr::Seq({Expr::Lit(a.substr(0, 1)), std::move(*rest)}));
  }
  if (alts.empty()) return std::nullopt;
  return Expr::Alt(std::move(alts));
}

// Digit strings D (possibly empty) with 0.D <= 0.A (< when strict).
std::optional<Expr> FracAtMost(const std::string& a, bool strict, bool allow_empty) {
  if (a.empty()) {
    // 0.D <= 0: only zeros; 0.D < 0: nothing.
    if (strict) return std::nullopt;
    return Expr::Repeat(DigitClass('0', '0'), allow_empty ? 0 : 1, kMaxDigits);
  }
  std::vector<Expr> alts;
  if (allow_empty) alts.push_back(Expr::Empty());  // 0 < 0.A
  if (a[0] > '0') alts.push_back(Expr::Seq({DigitClass('0', static_cast<char>(a[0] - 1)), AnyDigits()}));
  if (std::optional<Expr> rest = FracAtMost(a.substr(1), strict, true)) {
    alts.push_back(Expr::Seq({Expr::Lit(a.substr(0, 1)), std::move(*rest)}));
  }
  if (alts.empty()) return std::nullopt;
  return Expr::Alt(std::move(alts));
}

// Digit strings D (possibly empty when allow_empty) with 0.A <= 0.D <= 0.B (strict as
// said), 0.A <= 0.B.
std::optional<Expr> FracBetween(const std::string& a, bool sa, const std::string& b, bool sb, bool allow_empty) {
  if (b.empty()) {  // then a is empty too: D = 0
    if (sa || sb) return std::nullopt;
    return Expr::Repeat(DigitClass('0', '0'), allow_empty ? 0 : 1, kMaxDigits);
  }
  const char a0 = a.empty() ? '0' : a[0];
  const std::string a_rest = a.empty() ? "" : a.substr(1);
  std::vector<Expr> alts;
  if (allow_empty && a.empty() && !sa) alts.push_back(Expr::Empty());  // D = 0, and 0 < 0.B
  if (a0 == b[0]) {
    if (auto rest = FracBetween(a_rest, sa, b.substr(1), sb, true)) {
      alts.push_back(Expr::Seq({Expr::Lit(std::string(1, a0)), std::move(*rest)}));
    }
  } else {
    if (auto rest = FracAtLeast(a_rest, sa, true)) alts.push_back(Expr::Seq({Expr::Lit(std::string(1, a0)), std::move(*rest)}));
    if (b[0] - a0 >= 2) alts.push_back(Expr::Seq({DigitClass(static_cast<char>(a0 + 1), static_cast<char>(b[0] - 1)), AnyDigits()}));
    if (auto rest = FracAtMost(b.substr(1), sb, true)) alts.push_back(Expr::Seq({Expr::Lit(b.substr(0, 1)), std::move(*rest)}));
  }
  if (alts.empty()) return std::nullopt;
  return Expr::Alt(std::move(alts));
}

// Magnitudes m (non-negative numbers without sign) with lo <= m <= hi (strict as said);
// hi absent: unbounded.
std::optional<Expr> Magnitudes(const Decimal& lo, bool slo, const std::optional<Decimal>& hi, bool shi) {
  if (hi && (Less(*hi, lo) || (!Less(lo, *hi) && (slo || shi)))) return std::nullopt;
  std::vector<Expr> alts;
  // The absent fraction is the value I.0: allowed where "" is, i.e. when the fraction
  // grammar would accept the empty digit string.
  auto with_fraction = [&](Expr integer, std::optional<Expr> digits_nonempty, bool zero_ok) {
    std::vector<Expr> f;
    if (zero_ok) f.push_back(Expr::Empty());
    if (digits_nonempty) f.push_back(Expr::Seq({Expr::Lit("."), std::move(*digits_nonempty)}));
    if (f.empty()) return;
    alts.push_back(Expr::Seq({std::move(integer), Expr::Alt(std::move(f))}));
  };
  const Expr lo_int = Expr::Lit(std::to_string(lo.integer));
  if (hi && hi->integer == lo.integer) {
    // Both bounds on one integer part: fraction in [lo.fraction, hi.fraction].
    const bool zero_ok = lo.fraction.empty() && !slo && !(hi->fraction.empty() && shi);
    with_fraction(lo_int, FracBetween(lo.fraction, slo, hi->fraction, shi, false), zero_ok);
    if (alts.empty()) return std::nullopt;
    return Expr::Alt(std::move(alts));
  }
  // I == lo.integer: fraction >= lo.fraction.
  with_fraction(lo_int, FracAtLeast(lo.fraction, slo, false), lo.fraction.empty() && !slo);
  // lo.integer < I < hi.integer (or unbounded): any fraction.
  const int64_t mid_hi = hi ? hi->integer - 1 : -1;
  if (!hi || mid_hi >= lo.integer + 1) {
    alts.push_back(Expr::Seq({NonNegativeRange(lo.integer + 1, mid_hi),
                              Expr::Opt(Expr::Seq({Expr::Lit("."), Digits(1, kMaxDigits)}))}));
  }
  // I == hi.integer: fraction <= hi.fraction.
  if (hi) {
    with_fraction(Expr::Lit(std::to_string(hi->integer)), FracAtMost(hi->fraction, shi, false),
                  !(hi->fraction.empty() && shi));
  }
  if (alts.empty()) return std::nullopt;
  return Expr::Alt(std::move(alts));
}

}  // namespace

std::optional<Expr> DecimalRange(const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi) {
  std::vector<Expr> alts;
  // v >= 0: magnitudes in [max(lo, 0), hi].
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    Decimal from;  // 0
    bool from_strict = false;
    if (lo && lo->value >= 0) {
      from = ToDecimal(lo->value);
      from_strict = lo->exclusive;
    }
    std::optional<Decimal> to;
    if (hi) to = ToDecimal(hi->value);
    if (auto m = Magnitudes(from, from_strict, to, hi && hi->exclusive)) alts.push_back(std::move(*m));
  }
  // v < 0: v = -m with m in [max(-hi, 0), -lo] ("-0" equals 0, which is in range here).
  if (!lo || lo->value < 0) {
    Decimal from;
    bool from_strict = false;
    if (hi && hi->value < 0) {
      from = ToDecimal(hi->value);
      from_strict = hi->exclusive;
    } else if (hi && hi->value == 0 && hi->exclusive) {
      from_strict = true;  // v < 0: m > 0
    }
    std::optional<Decimal> to;
    if (lo) to = ToDecimal(lo->value);
    if (auto m = Magnitudes(from, from_strict, to, lo && lo->exclusive)) {
      alts.push_back(Expr::Seq({Expr::Lit("-"), std::move(*m)}));
    }
  }
  if (alts.empty()) return std::nullopt;
  return Expr::Alt(std::move(alts));
}

}  // namespace tandem::grammar
