#include "testing/label_selector.h"

#include <algorithm>
#include <cctype>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/object_names.h"

namespace kubetrain::kube {
namespace {

using json = nlohmann::json;

constexpr char kQualifiedNameFmt[] =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
constexpr char kLabelValueFmt[] =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
constexpr char kDns1123SubdomainFmt[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }
std::string_view SV(absl::string_view s) { return std::string_view(s.data(), s.size()); }

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
bool MatchesQualifiedNamePart(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

std::string OperatorString(LabelSelector::Operator op) {
  switch (op) {
    case LabelSelector::Operator::kEquals:
      return "=";
    case LabelSelector::Operator::kNotEquals:
      return "!=";
    case LabelSelector::Operator::kIn:
      return "in";
    case LabelSelector::Operator::kNotIn:
      return "notin";
    case LabelSelector::Operator::kExists:
      return "exists";
    case LabelSelector::Operator::kDoesNotExist:
      return "!";
  }
  return "?";
}

// --- lexer (mirrors k8s.io/apimachinery/pkg/labels/selector.go) ---
enum class Token {
  kEnd,
  kIdentifier,
  kIn,
  kNotIn,
  kEquals,        // =
  kDoubleEquals,  // ==
  kNotEquals,     // !=
  kBang,          // !
  kOpenParen,
  kCloseParen,
  kComma,
  kGreater,
  kLess,
  kError,
};

bool IsSpecial(char c) {
  return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

struct Lexed {
  Token token;
  std::string literal;
};

std::vector<Lexed> Lex(std::string_view s) {
  std::vector<Lexed> out;
  size_t i = 0;
  while (true) {
    while (i < s.size() && IsSpace(s[i])) ++i;
    if (i >= s.size()) {
      out.push_back({Token::kEnd, ""});
      return out;
    }
    char c = s[i];
    if (IsSpecial(c)) {
      std::string lit(1, c);
      if (i + 1 < s.size() && s[i + 1] == '=' && (c == '=' || c == '!')) {
        lit.push_back('=');
      }
      i += lit.size();
      Token t = Token::kError;
      if (lit == "=") t = Token::kEquals;
      if (lit == "==") t = Token::kDoubleEquals;
      if (lit == "!=") t = Token::kNotEquals;
      if (lit == "!") t = Token::kBang;
      if (lit == "(") t = Token::kOpenParen;
      if (lit == ")") t = Token::kCloseParen;
      if (lit == ",") t = Token::kComma;
      if (lit == ">") t = Token::kGreater;
      if (lit == "<") t = Token::kLess;
      out.push_back({t, lit});
      continue;
    }
    size_t start = i;
    while (i < s.size() && !IsSpace(s[i]) && !IsSpecial(s[i])) ++i;
    std::string lit(s.substr(start, i - start));
    Token t = Token::kIdentifier;
    if (lit == "in") t = Token::kIn;
    if (lit == "notin") t = Token::kNotIn;
    out.push_back({t, lit});
  }
}

class Parser {
 public:
  explicit Parser(std::vector<Lexed> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<std::vector<LabelSelector::Requirement>> Parse() {
    std::vector<LabelSelector::Requirement> out;
    while (true) {
      const Lexed& t = Peek();
      if (t.token == Token::kEnd) return out;
      if (t.token != Token::kIdentifier && t.token != Token::kBang && t.token != Token::kIn &&
          t.token != Token::kNotIn) {
        return Error(absl::StrCat("found '", t.literal.empty() ? "" : t.literal,
                                  "', expected: !, identifier, or 'end of string'"));
      }
      absl::StatusOr<LabelSelector::Requirement> r = ParseRequirement();
      if (!r.ok()) return r.status();
      out.push_back(*std::move(r));
      const Lexed& next = Next();
      if (next.token == Token::kEnd) return out;
      if (next.token != Token::kComma) {
        return Error(absl::StrCat("found '", next.literal, "', expected: ',' or 'end of string'"));
      }
      if (Peek().token == Token::kEnd) {
        return Error("found '', expected: identifier after ','");
      }
    }
  }

 private:
  const Lexed& Peek() const { return tokens_[std::min(pos_, tokens_.size() - 1)]; }
  const Lexed& Next() {
    const Lexed& t = Peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  static absl::Status Error(std::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("unable to parse requirement: ", AV(what)));
  }

  absl::StatusOr<LabelSelector::Requirement> ParseRequirement() {
    LabelSelector::Requirement r;
    const Lexed& first = Next();
    if (first.token == Token::kBang) {
      const Lexed& key = Next();
      if (key.token != Token::kIdentifier) {
        return Error(absl::StrCat("found '", key.literal, "', expected: identifier"));
      }
      r.key = key.literal;
      r.op = LabelSelector::Operator::kDoesNotExist;
      return r;
    }
    if (first.token != Token::kIdentifier) {
      return Error(absl::StrCat("found '", first.literal, "', expected: identifier"));
    }
    r.key = first.literal;
    const Lexed& op = Peek();
    if (op.token == Token::kEnd || op.token == Token::kComma) {
      r.op = LabelSelector::Operator::kExists;
      return r;
    }
    Next();
    switch (op.token) {
      case Token::kEquals:
      case Token::kDoubleEquals:
        r.op = LabelSelector::Operator::kEquals;
        break;
      case Token::kNotEquals:
        r.op = LabelSelector::Operator::kNotEquals;
        break;
      case Token::kIn:
        r.op = LabelSelector::Operator::kIn;
        break;
      case Token::kNotIn:
        r.op = LabelSelector::Operator::kNotIn;
        break;
      case Token::kGreater:
      case Token::kLess:
        return Error(absl::StrCat("operator '", op.literal, "' is not supported"));
      default:
        return Error(
            absl::StrCat("found '", op.literal, "', expected: in, notin, =, ==, !=, gt, lt"));
    }
    if (r.op == LabelSelector::Operator::kIn || r.op == LabelSelector::Operator::kNotIn) {
      const Lexed& open = Next();
      if (open.token != Token::kOpenParen) {
        return Error(absl::StrCat("found '", open.literal, "', expected: '('"));
      }
      while (true) {
        const Lexed& v = Next();
        if (v.token == Token::kIdentifier || v.token == Token::kIn || v.token == Token::kNotIn) {
          r.values.push_back(v.literal);
          const Lexed& sep = Next();
          if (sep.token == Token::kCloseParen) break;
          if (sep.token != Token::kComma) {
            return Error(absl::StrCat("found '", sep.literal, "', expected: ',' or ')'"));
          }
          continue;
        }
        if (v.token == Token::kCloseParen && r.values.empty()) break;
        if (v.token == Token::kComma || v.token == Token::kCloseParen) {
          // Empty value inside the list ("(a,)"): k8s accepts "" as a value.
          r.values.push_back("");
          if (v.token == Token::kCloseParen) break;
          continue;
        }
        return Error(absl::StrCat("found '", v.literal, "', expected: ',', ')' or identifier"));
      }
      return r;
    }
    // Exact value; an empty value ("a=") is allowed.
    const Lexed& v = Peek();
    if (v.token == Token::kEnd || v.token == Token::kComma) {
      r.values.push_back("");
      return r;
    }
    Next();
    if (v.token != Token::kIdentifier && v.token != Token::kIn && v.token != Token::kNotIn) {
      return Error(absl::StrCat("found '", v.literal, "', expected: identifier"));
    }
    r.values.push_back(v.literal);
    return r;
  }

  std::vector<Lexed> tokens_;
  size_t pos_ = 0;
};

absl::Status ValidateRequirement(LabelSelector::Requirement& r) {
  if (std::string err = ValidateLabelKey(r.key); !err.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("key: Invalid value: \"", r.key, "\": ", err));
  }
  std::sort(r.values.begin(), r.values.end());
  r.values.erase(std::unique(r.values.begin(), r.values.end()), r.values.end());
  switch (r.op) {
    case LabelSelector::Operator::kIn:
    case LabelSelector::Operator::kNotIn:
      if (r.values.empty()) {
        return absl::InvalidArgumentError(
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't "
            "be empty");
      }
      break;
    case LabelSelector::Operator::kEquals:
    case LabelSelector::Operator::kNotEquals:
      if (r.values.size() != 1) {
        return absl::InvalidArgumentError(
            "values: Invalid value: exact-match compatibility requires one single value");
      }
      break;
    case LabelSelector::Operator::kExists:
    case LabelSelector::Operator::kDoesNotExist:
      if (!r.values.empty()) {
        return absl::InvalidArgumentError(
            "values: Invalid value: values set must be empty for exists and does not exist");
      }
      break;
  }
  for (size_t i = 0; i < r.values.size(); ++i) {
    if (std::string err = ValidateLabelValue(r.values[i]); !err.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "values[", i, "][", r.key, "]: Invalid value: \"", r.values[i], "\": ", err));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ValidateLabelKey(std::string_view key) {
  std::vector<absl::string_view> parts = absl::StrSplit(AV(key), '/');
  std::string_view name = key;
  if (parts.size() == 2) {
    std::string_view prefix = SV(parts[0]);
    name = SV(parts[1]);
    if (prefix.empty()) return "prefix part must be non-empty";
    if (!base::IsDns1123Subdomain(prefix))
      return absl::StrCat("prefix part ", kDns1123SubdomainFmt);
  } else if (parts.size() > 2) {
    return absl::StrCat(
        "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
        "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
  }
  if (name.empty()) return "name part must be non-empty";
  if (name.size() > 63) return "name part must be no more than 63 characters";
  if (!MatchesQualifiedNamePart(name)) return absl::StrCat("name part ", kQualifiedNameFmt);
  return "";
}

std::string ValidateLabelValue(std::string_view value) {
  if (value.empty()) return "";
  if (value.size() > 63) return "must be no more than 63 characters";
  if (!MatchesQualifiedNamePart(value)) return kLabelValueFmt;
  return "";
}

void LabelSelector::Add(Requirement requirement) {
  requirements_.push_back(std::move(requirement));
  std::stable_sort(requirements_.begin(), requirements_.end(),
                   [](const Requirement& a, const Requirement& b) {
                     return std::tie(a.key, a.op) < std::tie(b.key, b.op);
                   });
}

absl::StatusOr<LabelSelector> LabelSelector::Parse(std::string_view selector) {
  Parser parser(Lex(selector));
  absl::StatusOr<std::vector<Requirement>> reqs = parser.Parse();
  if (!reqs.ok()) return reqs.status();
  LabelSelector out;
  for (Requirement& r : *reqs) {
    if (absl::Status s = ValidateRequirement(r); !s.ok()) return s;
    out.Add(std::move(r));
  }
  return out;
}

absl::StatusOr<LabelSelector> LabelSelector::FromJson(const json& selector) {
  LabelSelector out;
  if (selector.is_null()) return out;
  if (!selector.is_object()) {
    return absl::InvalidArgumentError("label selector must be a JSON object");
  }
  if (auto it = selector.find("matchLabels"); it != selector.end() && !it->is_null()) {
    if (!it->is_object()) return absl::InvalidArgumentError("matchLabels must be an object");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat("matchLabels[", k, "] must be a string"));
      }
      Requirement r{.key = k, .op = Operator::kEquals, .values = {v.get<std::string>()}};
      if (absl::Status s = ValidateRequirement(r); !s.ok()) return s;
      out.Add(std::move(r));
    }
  }
  if (auto it = selector.find("matchExpressions"); it != selector.end() && !it->is_null()) {
    if (!it->is_array()) return absl::InvalidArgumentError("matchExpressions must be a list");
    for (const json& e : *it) {
      if (!e.is_object() || !e.contains("key") || !e["key"].is_string()) {
        return absl::InvalidArgumentError("matchExpressions entry needs a string key");
      }
      Requirement r;
      r.key = e["key"].get<std::string>();
      std::string op = e.value("operator", std::string());
      if (op == "In") {
        r.op = Operator::kIn;
      } else if (op == "NotIn") {
        r.op = Operator::kNotIn;
      } else if (op == "Exists") {
        r.op = Operator::kExists;
      } else if (op == "DoesNotExist") {
        r.op = Operator::kDoesNotExist;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("\"", op, "\" is not a valid pod selector operator"));
      }
      if (auto v = e.find("values"); v != e.end() && !v->is_null()) {
        if (!v->is_array()) return absl::InvalidArgumentError("values must be a list");
        for (const json& x : *v) {
          if (!x.is_string()) return absl::InvalidArgumentError("values must be strings");
          r.values.push_back(x.get<std::string>());
        }
      }
      if (absl::Status s = ValidateRequirement(r); !s.ok()) return s;
      out.Add(std::move(r));
    }
  }
  return out;
}

LabelSelector LabelSelector::FromMatchLabels(const std::map<std::string, std::string>& labels) {
  LabelSelector out;
  for (const auto& [k, v] : labels) {
    out.Add(Requirement{.key = k, .op = Operator::kEquals, .values = {v}});
  }
  return out;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const Requirement& r : requirements_) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    bool in_set = has && std::binary_search(r.values.begin(), r.values.end(), it->second);
    switch (r.op) {
      case Operator::kEquals:
      case Operator::kIn:
        if (!in_set) return false;
        break;
      case Operator::kNotEquals:
      case Operator::kNotIn:
        if (in_set) return false;
        break;
      case Operator::kExists:
        if (!has) return false;
        break;
      case Operator::kDoesNotExist:
        if (has) return false;
        break;
    }
  }
  return true;
}

bool LabelSelector::Matches(const json& labels_object) const {
  std::map<std::string, std::string> labels;
  if (labels_object.is_object()) {
    for (const auto& [k, v] : labels_object.items()) {
      if (v.is_string()) labels[k] = v.get<std::string>();
    }
  }
  return Matches(labels);
}

std::string LabelSelector::String() const {
  std::vector<std::string> parts;
  for (const Requirement& r : requirements_) {
    switch (r.op) {
      case Operator::kEquals:
      case Operator::kNotEquals:
        parts.push_back(absl::StrCat(r.key, OperatorString(r.op), r.values.front()));
        break;
      case Operator::kIn:
      case Operator::kNotIn:
        parts.push_back(absl::StrCat(r.key, " ", OperatorString(r.op), " (",
                                     absl::StrJoin(r.values, ","), ")"));
        break;
      case Operator::kExists:
        parts.push_back(r.key);
        break;
      case Operator::kDoesNotExist:
        parts.push_back(absl::StrCat("!", r.key));
        break;
    }
  }
  return absl::StrJoin(parts, ",");
}

std::vector<std::pair<std::string, std::string>> LabelSelector::EqualityRequirements() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Requirement& r : requirements_) {
    if ((r.op == Operator::kEquals || r.op == Operator::kIn) && r.values.size() == 1) {
      out.emplace_back(r.key, r.values.front());
    }
  }
  return out;
}

}  // namespace kubetrain::kube
