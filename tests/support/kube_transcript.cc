#include "tests/support/kube_transcript.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kubetrain::testing {

bool TranscriptExchange::IsWatch() const {
  return absl::StrContains(target, "watch=1") || absl::StrContains(target, "watch=true");
}

std::vector<TranscriptExchange> ParseTranscript(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  std::vector<TranscriptExchange> out;
  int open_watch = -1;  // index in `out` of the watch whose stream lines come later
  TranscriptExchange* cur = nullptr;
  bool in_during = false;
  auto start = [&](const std::string& title) {
    out.emplace_back();
    cur = &out.back();
    cur->title = title;
    cur->during_watch = in_during;
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (absl::StartsWith(line, "=====")) {
      cur = nullptr;
      in_during = false;
      continue;
    }
    if (absl::StartsWith(line, "### ")) {
      start(line.substr(4));
      continue;
    }
    if (absl::StartsWith(line, "[during watch")) {
      in_during = true;
      if (cur != nullptr) cur->during_watch = true;
      continue;
    }
    if (absl::StartsWith(line, ">>> ") && cur != nullptr) {
      std::string rest = line.substr(4);
      if (absl::StartsWith(rest, "body (")) {
        if (i + 1 < lines.size()) cur->request_body = lines[++i];
        continue;
      }
      if (absl::StartsWith(rest, "Content-Type: ")) {
        cur->content_type = rest.substr(14);
        continue;
      }
      std::vector<std::string> parts = absl::StrSplit(rest, ' ');
      if (parts.size() == 3 && absl::StartsWith(parts[2], "HTTP/")) {
        if (!cur->method.empty()) {
          std::string title = cur->title;
          start(title);
        }
        cur->method = parts[0];
        cur->target = parts[1];
        if (cur->IsWatch() && !cur->during_watch) open_watch = static_cast<int>(out.size()) - 1;
      }
      continue;
    }
    if (absl::StartsWith(line, "<<< ") && cur != nullptr) {
      std::string rest = line.substr(4);
      if (absl::StartsWith(rest, "HTTP/1.1 ")) {
        absl::SimpleAtoi(rest.substr(9, 3), &cur->code);
        continue;
      }
      if (absl::StartsWith(rest, "body (exact bytes")) {
        bool newline = absl::StrContains(rest, "ends with \\n");
        std::string body;
        while (i + 1 < lines.size() && !absl::StartsWith(lines[i + 1], "<<<") &&
               !absl::StartsWith(lines[i + 1], "(round trip") &&
               !absl::StartsWith(lines[i + 1], "=====") && !absl::StartsWith(lines[i + 1], "## ") &&
               !absl::StartsWith(lines[i + 1], "-----")) {
          if (!body.empty()) body.push_back('\n');
          body += lines[++i];
        }
        while (!body.empty() && body.back() == '\n') body.pop_back();
        if (newline) body.push_back('\n');
        cur->response_body = body;
        continue;
      }
      if (absl::StartsWith(rest, "raw watch stream")) {
        TranscriptExchange* w = open_watch >= 0 ? &out[static_cast<size_t>(open_watch)] : cur;
        while (i + 1 < lines.size() && absl::StartsWith(lines[i + 1], "t=")) {
          const std::string& l = lines[++i];
          size_t bar = l.find("| ");
          std::string content = bar == std::string::npos ? "" : l.substr(bar + 2);
          if (!content.empty() && !absl::StartsWith(content, "...")) {
            w->watch_lines.push_back(content);
          }
        }
        if (i + 1 < lines.size() && absl::StartsWith(lines[i + 1], "<<< end of stream")) {
          w->stream_end = lines[++i].substr(4);
        }
        open_watch = -1;
        continue;
      }
      size_t colon = rest.find(": ");
      if (colon != std::string::npos && rest.find(' ') > colon) {
        cur->response_headers[rest.substr(0, colon)] = rest.substr(colon + 2);
      }
      continue;
    }
    // Abbreviated watch lines right after a watch request ("t=  0.54 | ADDED owned-bg ...").
    if (cur != nullptr && cur->IsWatch() && absl::StartsWith(line, "t=")) {
      size_t bar = line.find("| ");
      if (bar != std::string::npos) cur->watch_lines.push_back(line.substr(bar + 2));
      continue;
    }
    // Compact setup records: "POST /path  body={...}  -> 201  resourceVersion=227".
    if (cur != nullptr &&
        (absl::StartsWith(line, "POST /") || absl::StartsWith(line, "PUT /") ||
         absl::StartsWith(line, "PATCH /") || absl::StartsWith(line, "DELETE /")) &&
        absl::StrContains(line, " -> ")) {
      TranscriptExchange ex;
      ex.title = cur->title;
      ex.compact = true;
      size_t sp = line.find(' ');
      size_t body_at = line.find("  body=");
      size_t arrow = line.find("  -> ");
      ex.method = line.substr(0, sp);
      ex.target = line.substr(sp + 1, (body_at == std::string::npos ? arrow : body_at) - sp - 1);
      if (body_at != std::string::npos) {
        ex.request_body = line.substr(body_at + 7, arrow - body_at - 7);
        ex.content_type = "application/json";
      }
      std::string tail = line.substr(arrow + 5);
      absl::SimpleAtoi(tail.substr(0, 3), &ex.code);
      size_t rv = tail.find("resourceVersion=");
      if (rv != std::string::npos) ex.compact_rv = tail.substr(rv + 16);
      out.push_back(std::move(ex));
      cur = &out.back();
      continue;
    }
  }
  return out;
}

absl::StatusOr<std::vector<TranscriptExchange>> ReadTranscript(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseTranscript(ss.str());
}

}  // namespace kubetrain::testing
