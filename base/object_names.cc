#include "base/object_names.h"

namespace kubetrain::base {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [-a-z0-9]* between a first and a last character that are [a-z0-9].
bool IsLabelBody(std::string_view s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

}  // namespace

bool IsDns1123Label(std::string_view s) { return s.size() <= 63 && IsLabelBody(s); }

bool IsDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string_view label =
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!IsLabelBody(label)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool IsDns1035Label(std::string_view s) {
  return IsDns1123Label(s) && s.front() >= 'a' && s.front() <= 'z';
}

}  // namespace kubetrain::base
