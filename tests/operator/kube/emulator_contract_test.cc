// Contract test: replays real kube-apiserver v1.20 transcripts
// (testdata/kube-api-transcripts/, copied from the capture rig) against a fresh
// KubeEmulator and checks the same status codes, Status reason/code/message/
// details, object fields and relative resourceVersion rules (bumped or not),
// and watch event sequences. uids, timestamps and absolute resourceVersions are
// mapped, not compared. Exchanges the emulator deliberately does differently are
// skipped by title with the reason next to them.
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/kube_emulator.h"
#include "tests/support/kube_emulator_client.h"
#include "tests/support/kube_transcript.h"

namespace kubetrain::testing {
namespace {

using json = nlohmann::json;

std::string TranscriptDir() {
  return absl::StrCat(KUBETRAIN_SOURCE_DIR, "/tests/operator/kube/testdata/kube-api-transcripts/");
}

struct Rules {
  // Title substring -> why the exchange is skipped.
  std::map<std::string, std::string> skip;
  // Title substring -> only this many leading characters of the message are compared.
  std::map<std::string, size_t> message_prefix;
  // Title substring -> run before the exchange.
  std::map<std::string, std::function<void(KubeEmulator&)>> before;
  // Watch lines (substring) the emulator deliberately does not produce -> why.
  std::map<std::string, std::string> drop_watch_lines;
};

// Replaces default-token-<random> names and allocated cluster IPs.
json Normalize(json v) {
  std::string s = v.dump();
  s = std::regex_replace(s, std::regex("default-token-[a-z0-9]{5}"), "default-token-*");
  s = std::regex_replace(s, std::regex("\"10\\.96\\.[0-9]+\\.[0-9]+\""), "\"10.96.x.x\"");
  return json::parse(s);
}

class Replayer {
 public:
  Replayer(KubeEmulator& emu, std::string file, Rules rules)
      : emu_(emu), file_(std::move(file)), rules_(std::move(rules)) {}

  void Run() {
    absl::StatusOr<std::vector<TranscriptExchange>> exs = ReadTranscript(TranscriptDir() + file_);
    ASSERT_TRUE(exs.ok()) << exs.status();
    CreateNamespaces(*exs);
    StartScenarioWatches(*exs);
    for (const TranscriptExchange& ex : *exs) {
      if (ex.method.empty()) continue;
      if (ex.IsWatch() && ex.code == 0) continue;  // scenario watch, checked at the end
      if (watch_ != nullptr && !ex.during_watch) FinishWatch();
      if (std::string why = SkipReason(ex); !why.empty()) {
        ++skipped_;
        continue;
      }
      for (const auto& [title, fn] : rules_.before) {
        if (absl::StrContains(ex.title, title)) fn(emu_);
      }
      if (ex.IsWatch() && !ex.during_watch && ex.code == 200) {
        StartWatch(ex);
        continue;
      }
      Replay(ex);
    }
    if (watch_ != nullptr) FinishWatch();
    FinishScenarioWatches();
    EXPECT_GT(replayed_, 0);
    std::printf("[%s] replayed %d exchanges, %d watches, skipped %d\n", file_.c_str(), replayed_,
                watches_, skipped_);
  }

 private:
  std::string SkipReason(const TranscriptExchange& ex) const {
    for (const auto& [title, why] : rules_.skip) {
      if (absl::StrContains(ex.title, title)) return why;
    }
    return "";
  }

  // Namespaces the transcript uses but whose creation is not recorded.
  void CreateNamespaces(const std::vector<TranscriptExchange>& exs) {
    std::set<std::string> created, used;
    std::regex ns_re("/namespaces/(kt-[a-z0-9-]+)");
    for (const TranscriptExchange& ex : exs) {
      if (ex.method == "POST" && ex.target == "/api/v1/namespaces") {
        json b = json::parse(ex.request_body, nullptr, false);
        if (b.is_object()) created.insert(b["metadata"].value("name", ""));
      }
      std::smatch m;
      if (std::regex_search(ex.target, m, ns_re)) used.insert(m[1]);
    }
    for (const std::string& ns : used) {
      if (created.count(ns)) continue;
      HttpReply r = Send(
          "POST", emu_.Url() + "/api/v1/namespaces",
          json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}}.dump());
      ASSERT_EQ(r.code, 201) << r.body;
    }
  }

  std::string Rewrite(std::string s) const {
    for (const auto& [from, to] : uid_) absl::StrReplaceAll({{from, to}}, &s);
    for (const auto& [from, to] : cont_) absl::StrReplaceAll({{from, to}}, &s);
    for (const auto& [from, to] : rv_) {
      absl::StrReplaceAll({{absl::StrCat("\"resourceVersion\":\"", from, "\""),
                            absl::StrCat("\"resourceVersion\":\"", to, "\"")}},
                          &s);
      s = std::regex_replace(s, std::regex(absl::StrCat("resourceVersion=", from, "(&|$)")),
                             absl::StrCat("resourceVersion=", to, "$1"));
    }
    return s;
  }

  void Record(const json& t, const json& e) {
    if (!t.is_object() || !e.is_object()) return;
    auto meta = [](const json& o) { return o.value("metadata", json::object()); };
    json tm = meta(t), em = meta(e);
    if (tm.contains("uid") && em.contains("uid")) uid_[tm["uid"]] = em["uid"];
    if (tm.contains("resourceVersion") && em.contains("resourceVersion")) {
      rv_[tm["resourceVersion"]] = em["resourceVersion"];
    }
    std::string tc = tm.value("continue", ""), ec = em.value("continue", "");
    if (!tc.empty() && !ec.empty()) cont_[tc] = ec;
    if (t.contains("details") && e.contains("details") && t["details"].contains("uid") &&
        e["details"].contains("uid")) {
      uid_[t["details"]["uid"]] = e["details"]["uid"];
    }
    if (t.contains("items") && e.contains("items")) {
      for (const json& ti : t["items"]) {
        for (const json& ei : e["items"]) {
          if (meta(ti).value("name", "") == meta(ei).value("name", "")) Record(ti, ei);
        }
      }
    }
  }

  // resourceVersion bumped in the transcript <=> bumped in the emulator.
  void CheckRelativeRv(const std::string& where, const json& t, const json& e) {
    if (!t.is_object() || !t.contains("metadata") || t.value("kind", "") == "Status") return;
    if (absl::EndsWith(t.value("kind", ""), "List")) return;
    std::string key = absl::StrCat(t.value("kind", ""), "/", t["metadata"].value("namespace", ""),
                                   "/", t["metadata"].value("name", ""));
    std::string trv = t["metadata"].value("resourceVersion", "");
    std::string erv = e["metadata"].value("resourceVersion", "");
    auto it = last_rv_.find(key);
    if (it != last_rv_.end() && !trv.empty()) {
      EXPECT_EQ(trv == it->second.first, erv == it->second.second)
          << where << ": resourceVersion " << (trv == it->second.first ? "kept" : "bumped")
          << " by the real server (" << it->second.first << " -> " << trv << "), emulator "
          << it->second.second << " -> " << erv;
    }
    if (!trv.empty()) last_rv_[key] = {trv, erv};
  }

  void CompareStatus(const std::string& where, const std::string& title, const json& t,
                     const json& e) {
    EXPECT_EQ(e.value("kind", ""), "Status") << where << " " << e.dump();
    EXPECT_EQ(e.value("status", ""), t.value("status", "")) << where;
    EXPECT_EQ(e.value("reason", ""), t.value("reason", "")) << where << " " << e.dump();
    EXPECT_EQ(e.value("code", 0), t.value("code", 0)) << where;
    std::string tmsg = Rewrite(t.value("message", ""));
    std::string emsg = e.value("message", "");
    size_t limit = std::string::npos;
    for (const auto& [k, n] : rules_.message_prefix) {
      if (absl::StrContains(title, k)) limit = n;
    }
    if (size_t nl = tmsg.find('\n'); nl != std::string::npos) limit = std::min(limit, nl);
    EXPECT_EQ(emsg.substr(0, limit), tmsg.substr(0, limit)) << where;
    json td = t.value("details", json()), ed = e.value("details", json());
    EXPECT_EQ(td.is_null(), ed.is_null()) << where << " details " << ed.dump();
    if (td.is_object() && ed.is_object()) {
      EXPECT_EQ(ed.value("name", ""), Rewrite(td.value("name", ""))) << where << " details.name";
      for (const char* k : {"group", "kind", "retryAfterSeconds"}) {
        EXPECT_EQ(ed.value(k, json()), td.value(k, json())) << where << " details." << k;
      }
      if (td.contains("uid")) {
        EXPECT_EQ(ed.value("uid", ""), Rewrite(td["uid"])) << where;
      }
      json tc = td.value("causes", json::array()), ec = ed.value("causes", json::array());
      EXPECT_EQ(ec.size(), tc.size()) << where << " causes " << ec.dump();
      for (size_t i = 0; i < std::min(tc.size(), ec.size()); ++i) {
        EXPECT_EQ(ec[i].value("reason", ""), tc[i].value("reason", "")) << where;
        EXPECT_EQ(ec[i].value("field", ""), tc[i].value("field", "")) << where;
        std::string tm = tc[i].value("message", "");
        EXPECT_EQ(ec[i].value("message", "").substr(0, std::min(limit, tm.find('\n'))),
                  tm.substr(0, std::min(limit, tm.find('\n'))))
            << where;
      }
    }
  }

  void CompareObject(const std::string& where, const json& t, const json& e, bool generated) {
    EXPECT_EQ(e.value("kind", ""), t.value("kind", "")) << where;
    EXPECT_EQ(e.value("apiVersion", ""), t.value("apiVersion", "")) << where;
    json tm = t.value("metadata", json::object()), em = e.value("metadata", json::object());
    if (!generated) {
      EXPECT_EQ(em.value("name", ""), tm.value("name", "")) << where;
    }
    for (const char* k : {"namespace", "generateName", "labels", "annotations", "finalizers",
                          "generation", "deletionGracePeriodSeconds"}) {
      EXPECT_EQ(em.value(k, json()), tm.value(k, json())) << where << " metadata." << k;
    }
    EXPECT_EQ(Rewrite(tm.value("ownerReferences", json()).dump()),
              em.value("ownerReferences", json()).dump())
        << where;
    EXPECT_EQ(em.contains("deletionTimestamp"), tm.contains("deletionTimestamp")) << where;
    for (const auto& [k, v] : t.items()) {
      if (k == "metadata") continue;
      EXPECT_EQ(Normalize(e.value(k, json())), Normalize(v)) << where << " ." << k;
    }
    for (const auto& [k, v] : e.items()) {
      EXPECT_TRUE(t.contains(k)) << where << " unexpected ." << k;
    }
  }

  void CompareList(const std::string& where, const std::string& target, const json& t,
                   const json& e) {
    EXPECT_EQ(e.value("kind", ""), t.value("kind", "")) << where;
    auto names = [](const json& l) {
      std::vector<std::string> out;
      for (const json& i : l.value("items", json::array())) {
        out.push_back(i["metadata"].value("name", ""));
      }
      return out;
    };
    std::vector<std::string> tn = names(t), en = names(e);
    if (absl::StrContains(target, "resourceVersion=0")) {  // watch cache: unsorted
      std::sort(tn.begin(), tn.end());
      std::sort(en.begin(), en.end());
    }
    EXPECT_EQ(en, tn) << where;
    json tm = t["metadata"], em = e["metadata"];
    EXPECT_EQ(em.contains("continue"), tm.contains("continue")) << where << " " << em.dump();
    EXPECT_EQ(em.value("continue", "").empty(), tm.value("continue", "").empty()) << where;
    EXPECT_EQ(em.value("remainingItemCount", json()), tm.value("remainingItemCount", json()))
        << where;
    for (size_t i = 0; i < std::min(t["items"].size(), e["items"].size()); ++i) {
      if (absl::StrContains(target, "resourceVersion=0")) break;
      CompareObject(where, t["items"][i], e["items"][i], false);
    }
  }

  void Replay(const TranscriptExchange& ex) {
    ++replayed_;
    std::string where = absl::StrCat(file_, ": ", ex.title, " [", ex.method, " ", ex.target, "]");
    HttpCall call;
    call.method = ex.method;
    call.url = emu_.Url() + Rewrite(ex.target);
    call.body = Rewrite(ex.request_body);
    call.content_type = ex.content_type.empty() ? "application/json" : ex.content_type;
    HttpReply r = Fetch(call);
    ASSERT_EQ(r.code, ex.code) << where << "\nemulator: " << r.body
                               << "\nreal:     " << ex.response_body;
    json e = r.Json();
    json req = json::parse(ex.request_body, nullptr, false);
    bool generated = req.is_object() && req.contains("metadata") &&
                     req["metadata"].value("name", "").empty() &&
                     !req["metadata"].value("generateName", "").empty();
    std::string t_body = ex.response_body;
    if (t_body.empty() && !ex.watch_lines.empty()) t_body = ex.watch_lines[0];  // non-200 watch
    MapTokens(t_body, r.body);
    if (generated) MapGeneratedName(t_body, e);
    if (ex.compact) {
      json t = {{"kind", "x"}, {"metadata", {{"resourceVersion", ex.compact_rv}}}};
      if (e.is_object()) Record(t, e);
      return;
    }
    json t = json::parse(t_body, nullptr, false);
    if (t.is_discarded()) {  // text/plain
      EXPECT_EQ(r.body, t_body) << where;
      return;
    }
    ASSERT_FALSE(e.is_discarded()) << where << " " << r.body;
    // Wire format: compact JSON with one trailing newline, as Go writes it.
    EXPECT_TRUE(absl::EndsWith(r.body, "}\n")) << where;
    if (t.value("kind", "") == "Status") {
      CompareStatus(where, ex.title, t, e);
    } else if (absl::EndsWith(t.value("kind", ""), "List")) {
      CompareList(where, ex.target, t, e);
    } else {
      CompareObject(where, t, e, generated);
      CheckRelativeRv(where, t, e);
    }
    Record(t, e);
  }

  // The ServiceAccount token volume name is random on both sides.
  void MapTokens(const std::string& t, const std::string& e) {
    std::regex re("default-token-[a-z0-9]{5}");
    std::smatch mt, me;
    if (std::regex_search(t, mt, re) && std::regex_search(e, me, re)) uid_[mt[0]] = me[0];
  }

  // generateName suffixes are random: map the real name to the emulator's.
  void MapGeneratedName(const std::string& t_body, const json& e) {
    json t = json::parse(t_body, nullptr, false);
    auto name = [](const json& o) -> std::string {
      if (!o.is_object()) return "";
      if (o.contains("metadata") && o["metadata"].contains("name")) return o["metadata"]["name"];
      if (o.contains("details") && o["details"].contains("name")) return o["details"]["name"];
      return "";
    };
    std::string tn = name(t), en = name(e);
    if (!tn.empty() && !en.empty()) uid_[tn] = en;
  }

  // Watches kept open for a whole scenario (abbreviated lines, no response recorded)
  // start before the first exchange.
  void StartScenarioWatches(const std::vector<TranscriptExchange>& exs) {
    for (const TranscriptExchange& ex : exs) {
      if (!ex.IsWatch() || ex.code != 0 || ex.watch_lines.empty()) continue;
      std::string target =
          std::regex_replace(ex.target, std::regex("resourceVersion=[0-9]+"),
                             absl::StrCat("resourceVersion=", emu_.ResourceVersion()));
      scenario_.push_back({ex, std::make_unique<WatchStream>(emu_.Url() + target)});
    }
  }

  void FinishScenarioWatches() {
    for (auto& [ex, stream] : scenario_) {
      ++watches_;
      std::string where = absl::StrCat(file_, ": ", ex.title);
      std::vector<std::string> expected;
      for (const std::string& l : ex.watch_lines) {
        bool drop = false;
        for (const auto& [k, why] : rules_.drop_watch_lines) drop = drop || absl::StrContains(l, k);
        if (drop) continue;
        std::vector<std::string> parts = absl::StrSplit(l, ' ', absl::SkipEmpty());
        if (parts.size() >= 2) expected.push_back(absl::StrCat(parts[0], " ", parts[1]));
      }
      stream->WaitForLines(expected.size(), absl::Seconds(10));
      absl::SleepFor(absl::Milliseconds(200));  // nothing more may arrive
      std::vector<std::string> got;
      for (const json& j : stream->Events()) {
        got.push_back(
            absl::StrCat(j.value("type", ""), " ", j["object"]["metadata"].value("name", "")));
      }
      // The capture waited for the garbage collector between steps, the replay does not:
      // compare each object's own event sequence, not the interleaving.
      auto per_object = [](const std::vector<std::string>& lines) {
        std::map<std::string, std::vector<std::string>> out;
        for (const std::string& l : lines) {
          size_t sp = l.find(' ');
          out[l.substr(sp + 1)].push_back(l.substr(0, sp));
        }
        return out;
      };
      EXPECT_EQ(per_object(got), per_object(expected)) << where;
    }
    scenario_.clear();
  }

  void StartWatch(const TranscriptExchange& ex) {
    ++watches_;
    watch_ex_ = ex;
    watch_ = std::make_unique<WatchStream>(emu_.Url() + Rewrite(ex.target));
  }

  void FinishWatch() {
    const TranscriptExchange& ex = watch_ex_;
    std::string where = absl::StrCat(file_, ": ", ex.title, " [watch ", ex.target, "]");
    std::vector<std::string> expected;
    bool bookmark_expected = false;
    for (const std::string& l : ex.watch_lines) {
      json j = json::parse(l, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.value("type", "") == "BOOKMARK") {
        bookmark_expected = true;
        continue;
      }
      expected.push_back(
          absl::StrCat(j.value("type", ""), " ", j["object"]["metadata"].value("name", "")));
    }
    bool timed = absl::StrContains(ex.target, "timeoutSeconds=");
    if (timed) {
      EXPECT_TRUE(watch_->WaitForEnd(absl::Seconds(15))) << where;
      EXPECT_TRUE(watch_->clean_end()) << where << " stream must end cleanly";
    } else {
      watch_->WaitForLines(expected.size(), absl::Seconds(10));
    }
    std::vector<std::string> got;
    bool bookmark_seen = false;
    std::vector<json> events = watch_->Events();
    for (const json& j : events) {
      ASSERT_FALSE(j.is_discarded()) << where;
      if (j.value("type", "") == "BOOKMARK") {
        bookmark_seen = true;
        // The exact shape of README #6, resourceVersion aside.
        json o = j["object"];
        o["metadata"].erase("resourceVersion");
        EXPECT_EQ(
            o.dump(),
            R"({"apiVersion":"v1","kind":"Pod","metadata":{"creationTimestamp":null},"spec":{"containers":null},"status":{}})")
            << where;
        continue;
      }
      got.push_back(
          absl::StrCat(j.value("type", ""), " ", j["object"]["metadata"].value("name", "")));
      if (j.value("type", "") == "ERROR") {
        EXPECT_EQ(j["object"].value("reason", ""), "Expired") << where;
        EXPECT_EQ(j["object"].value("code", 0), 410) << where;
      }
    }
    EXPECT_EQ(got, expected) << where;
    if (timed && bookmark_expected) {
      EXPECT_TRUE(bookmark_seen) << where;
    }
    watch_.reset();
  }

  KubeEmulator& emu_;
  std::string file_;
  Rules rules_;
  std::map<std::string, std::string> uid_, rv_, cont_;
  std::map<std::string, std::pair<std::string, std::string>> last_rv_;
  std::unique_ptr<WatchStream> watch_;
  TranscriptExchange watch_ex_;
  std::vector<std::pair<TranscriptExchange, std::unique_ptr<WatchStream>>> scenario_;
  int replayed_ = 0, watches_ = 0, skipped_ = 0;
};

// The transcripts were recorded with the CRD of 00-crd-setup (a smaller
// schema than crds/'s): the emulator checks TrainingJobs against that one.
std::unique_ptr<KubeEmulator> StartEmulator() {
  KubeEmulatorOptions options;
  options.crd_files = {KUBETRAIN_SOURCE_DIR "/tests/operator/kube/testdata/transcript-crd.json",
                       KUBETRAIN_SOURCE_DIR
                       "/tests/support/crds/scheduling.volcano.sh_podgroups.yaml"};
  absl::StatusOr<std::unique_ptr<KubeEmulator>> emu = KubeEmulator::Start(options);
  EXPECT_TRUE(emu.ok()) << emu.status();
  return emu.ok() ? *std::move(emu) : nullptr;
}

TEST(EmulatorContractTest, T01ListSelectorsPagination) {
  auto emu = StartEmulator();
  ASSERT_NE(emu, nullptr);
  Rules rules;
  rules.skip["malformed continue token"] =
      "Go's base64/JSON error text for arbitrary garbage is not reproduced byte for byte; the "
      "emulator answers the same 400 BadRequest with an 'invalid continue token' message";
  Replayer(*emu, "01-list-pods-selectors-pagination.txt", rules).Run();
}

TEST(EmulatorContractTest, T02CreateGetConflictNotFound) {
  auto emu = StartEmulator();
  ASSERT_NE(emu, nullptr);
  Rules rules;
  rules.skip["IMMEDIATELY after creating the namespace"] =
      "README #19: the emulator has no ServiceAccount token controller race; pods are accepted "
      "at once";
  Replayer(*emu, "02-create-get-pod-conflict-notfound.txt", rules).Run();
}

TEST(EmulatorContractTest, T03UpdatePutConflicts) {
  auto emu = StartEmulator();
  ASSERT_NE(emu, nullptr);
  Rules rules;
  // The Go diff after the first line of the immutability message is not reproduced.
  Replayer(*emu, "03-update-put-conflicts.txt", rules).Run();
}

TEST(EmulatorContractTest, T04Patches) {
  auto emu = StartEmulator();
  ASSERT_NE(emu, nullptr);
  Rules rules;
  rules.skip["merge-patch producing a wrongly-typed field"] =
      "the apiserver echoes the whole patched object inside the message; the emulator answers "
      "422 Invalid with its own message";
  rules.skip["server-side apply"] =
      "server-side apply is emulated as a merge patch; managedFields are not modelled";
  rules.skip["well-formed merge-patch producing an invalid object"] =
      "same 422 and cause, checked in kube_emulator_test; the transcript body is cut in this "
      "file's copy";
  Replayer(*emu, "04-patch-merge-strategic-json-invalid.txt", rules).Run();
}

TEST(EmulatorContractTest, T05WatchEventsBookmarks) {
  auto emu = StartEmulator();
  ASSERT_NE(emu, nullptr);
  Rules rules;
  Replayer(*emu, "05-watch-events-bookmarks.txt", rules).Run();
}

TEST(EmulatorContractTest, T06TooOld410) {
  auto emu = StartEmulator();
  ASSERT_NE(emu, nullptr);
  Rules rules;
  rules.skip["WATCH TrainingJobs (watch-cached custom resource) with resourceVersion=1"] =
      "depends on the real watch-cache window of a CRD created minutes earlier; Compact() "
      "covers this 410 in kube_emulator_test";
  rules.skip["AFTER the cache window moved"] =
      "needs the 200 unrecorded writes of the setup; the window is covered in kube_emulator_test";
  rules.skip["WATCH pods from RV 351"] = "needs the 200 unrecorded writes of the setup";
  rules.skip["start a paginated pod list"] = "lists namespace kt-01 of another transcript";
  rules.skip["LIST with the continue token from before compaction"] =
      "token of another transcript's namespace; expired tokens are covered in kube_emulator_test";
  rules.skip["proof the configmap watch cache is off"] =
      "the emulator has one store: resourceVersion=0 always ignores limit (the watch-cache "
      "behaviour of README #17)";
  rules.skip["LIST configmaps with resourceVersion=555&resourceVersionMatch=NotOlderThan"] =
      "the configmap carries an unrecorded 'tick' key written during the setup";
  rules.before["from the compacted resourceVersion 555"] = [](KubeEmulator& e) { e.Compact(); };
  rules.before["LIST configmaps with resourceVersion=555&resourceVersionMatch=Exact"] =
      [](KubeEmulator& e) { e.Compact(); };
  rules.message_prefix["from the compacted resourceVersion"] = 0;
  rules.message_prefix["resourceVersion far in the FUTURE"] = 36;  // "current: N" differs
  rules.skip["LIST configmaps (etcd) with a future resourceVersion"] =
      "configmaps were uncached on that server (--watch-cache-sizes=configmaps#0): etcd answers "
      "without retryAfterSeconds; the emulator answers every kind like the watch cache";
  Replayer(*emu, "06-watch-too-old-resourceversion-410.txt", rules).Run();
}

TEST(EmulatorContractTest, T08CustomResourceGenerationStatus) {
  auto emu = StartEmulator();
  ASSERT_NE(emu, nullptr);
  Rules rules;
  Replayer(*emu, "08-custom-resource-generation-status-subresource.txt", rules).Run();
}

TEST(EmulatorContractTest, T10DeletePropagationGc) {
  auto emu = StartEmulator();
  ASSERT_NE(emu, nullptr);
  Rules rules;
  rules.skip["PART 2"] = "CRD discovery latency of the real garbage collector is not emulated";
  rules.skip["EvalJob"] = "EvalJob is not a served resource (PART 2 of the transcript)";
  rules.skip["ej-"] = "EvalJob is not a served resource (PART 2 of the transcript)";
  rules.skip["a NEW CRD"] = "CRDs are built in; no CRD endpoint";
  rules.skip["GET owned-fg immediately after"] =
      "the emulator's garbage collector runs after gc_delay (20 ms), so the dependent may still "
      "exist right after the DELETE; kube_emulator_test waits for it with a deadline";
  rules.skip["GET owned-or afterwards"] =
      "timing: the transcript polled until the GC had run; kube_emulator_test waits for it";
  rules.message_prefix["stale resourceVersion precondition"] = 119;  // up to "record ("
  rules.drop_watch_lines["rv=663"] =
      "PodGC removed the bound pod of a missing node after 56 s; there is no PodGC";
  rules.drop_watch_lines["rv=664"] = "PodGC, as above";
  rules.skip["GET tj-fg immediately after"] =
      "timing: with a 20 ms GC the owner may already be gone";
  Replayer(*emu, "10-delete-propagation-garbage-collection.txt", rules).Run();
}

TEST(EmulatorContractTest, T11ServiceEventLease) {
  auto emu = StartEmulator();
  ASSERT_NE(emu, nullptr);
  Rules rules;
  rules.skip["GET endpoints"] = "endpoints are not served (no endpoints controller)";
  rules.message_prefix["MicroTime"] = 52;  // "Lease in version \"v1\" cannot be handled as a Lease"
  rules.message_prefix["unparseable renewTime"] = 52;
  Replayer(*emu, "11-service-event-lease.txt", rules).Run();
}

}  // namespace
}  // namespace kubetrain::testing
