#include "testing/kube_emulator_table.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kubetrain::testing {
namespace {

std::string Str(const OrderedJson& obj, std::initializer_list<const char*> path) {
  const OrderedJson* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object() || !cur->contains(key)) return "";
    cur = &(*cur)[key];
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

OrderedJson Age(const OrderedJson& obj, absl::Time now) {
  const std::string created = Str(obj, {"metadata", "creationTimestamp"});
  absl::Time t;
  std::string err;
  if (created.empty() || !absl::ParseTime(absl::RFC3339_full, created, &t, &err)) return nullptr;
  return HumanDuration(now - t);
}

OrderedJson DateCell(const OrderedJson& v, absl::Time now) {
  absl::Time t;
  std::string err;
  if (!v.is_string() || !absl::ParseTime(absl::RFC3339_full, v.get<std::string>(), &t, &err)) {
    return v;
  }
  return HumanDuration(now - t);
}

// kube-apiserver's pod printer (pkg/printers/internalversion printPod),
// the parts a process-run pod can show.
std::vector<OrderedJson> PodCells(const OrderedJson& pod, absl::Time now) {
  const OrderedJson& status = pod.contains("status") ? pod["status"] : OrderedJson::object();
  std::string reason = Str(pod, {"status", "phase"});
  if (const std::string r = Str(pod, {"status", "reason"}); !r.empty()) reason = r;
  int total = 0, ready = 0;
  int64_t restarts = 0;
  if (pod.contains("spec") && pod["spec"].contains("containers") &&
      pod["spec"]["containers"].is_array()) {
    total = static_cast<int>(pod["spec"]["containers"].size());
  }
  if (status.contains("containerStatuses") && status["containerStatuses"].is_array()) {
    bool running = false;
    for (auto it = status["containerStatuses"].rbegin(); it != status["containerStatuses"].rend();
         ++it) {
      const OrderedJson& c = *it;
      restarts += c.value("restartCount", int64_t{0});
      const OrderedJson state = c.value("state", OrderedJson::object());
      if (state.contains("waiting") && !Str(state, {"waiting", "reason"}).empty()) {
        reason = Str(state, {"waiting", "reason"});
      } else if (state.contains("terminated")) {
        const std::string r = Str(state, {"terminated", "reason"});
        if (!r.empty()) {
          reason = r;
        } else if (state["terminated"].value("signal", 0) != 0) {
          reason = absl::StrCat("Signal:", state["terminated"].value("signal", 0));
        } else {
          reason = absl::StrCat("ExitCode:", state["terminated"].value("exitCode", 0));
        }
      } else if (c.value("ready", false) && state.contains("running")) {
        ++ready;
        running = true;
      }
    }
    if (reason == "Completed" && running) reason = "Running";
  }
  if (pod.contains("metadata") && pod["metadata"].contains("deletionTimestamp")) {
    reason = "Terminating";
  }
  std::string ip = Str(pod, {"status", "podIP"});
  std::string node = Str(pod, {"spec", "nodeName"});
  return {absl::StrCat(ready, "/", total),
          reason,
          restarts,
          Age(pod, now),
          ip.empty() ? "<none>" : ip,
          node.empty() ? "<none>" : node,
          "<none>",
          "<none>"};
}

OrderedJson Column(const std::string& name, const std::string& type, const std::string& format,
                   const std::string& description, int priority) {
  OrderedJson c = OrderedJson::object();
  c["name"] = name;
  c["type"] = type;
  c["format"] = format;
  c["description"] = description;
  c["priority"] = priority;
  return c;
}

}  // namespace

bool WantsTable(const std::string& accept) {
  for (absl::string_view part : absl::StrSplit(accept, ',')) {
    if (absl::StrContains(part, "as=Table") && absl::StrContains(part, "g=meta.k8s.io") &&
        absl::StrContains(part, "v=v1") && !absl::StrContains(part, "v=v1beta1")) {
      return true;
    }
  }
  return false;
}

std::string HumanDuration(absl::Duration d) {
  const int64_t seconds = absl::ToInt64Seconds(d);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return absl::StrCat(seconds, "s");
  const int64_t minutes = seconds / 60;
  if (minutes < 10) {
    const int64_t s = seconds % 60;
    return s == 0 ? absl::StrCat(minutes, "m") : absl::StrCat(minutes, "m", s, "s");
  }
  if (minutes < 60 * 3) return absl::StrCat(minutes, "m");
  const int64_t hours = minutes / 60;
  if (hours < 8) {
    const int64_t m = minutes % 60;
    return m == 0 ? absl::StrCat(hours, "h") : absl::StrCat(hours, "h", m, "m");
  }
  if (hours < 48) return absl::StrCat(hours, "h");
  if (hours < 24 * 8) {
    const int64_t h = hours % 24;
    return h == 0 ? absl::StrCat(hours / 24, "d") : absl::StrCat(hours / 24, "d", h, "h");
  }
  if (hours < 24 * 365 * 2) return absl::StrCat(hours / 24, "d");
  if (hours < 24 * 365 * 8) {
    const int64_t days = hours / 24;
    const int64_t dy = days % 365;
    return dy == 0 ? absl::StrCat(days / 365, "y") : absl::StrCat(days / 365, "y", dy, "d");
  }
  return absl::StrCat(hours / 24 / 365, "y");
}

OrderedJson JsonPathValue(const OrderedJson& object, const std::string& path) {
  if (path.empty() || path[0] != '.') return nullptr;
  const OrderedJson* cur = &object;
  OrderedJson holder;
  for (absl::string_view seg : absl::StrSplit(path.substr(1), '.')) {
    std::string key(seg);
    std::string index;
    if (size_t b = key.find('['); b != std::string::npos) {
      if (key.back() != ']') return nullptr;
      index = key.substr(b + 1, key.size() - b - 2);
      key = key.substr(0, b);
    }
    if (!key.empty()) {
      if (!cur->is_object() || !cur->contains(key)) return nullptr;
      cur = &(*cur)[key];
    }
    if (index.empty()) continue;
    if (!cur->is_array() || cur->empty()) return nullptr;
    const int64_t size = static_cast<int64_t>(cur->size());
    int64_t i = 0;
    // "[n]", "[-n]", or a one-element slice "[n:]" / "[-1:]".
    std::string start = index;
    if (absl::EndsWith(index, ":")) start = index.substr(0, index.size() - 1);
    if (!absl::SimpleAtoi(start, &i)) return nullptr;
    if (i < 0) i += size;
    if (i < 0 || i >= size) return nullptr;
    holder = (*cur)[static_cast<size_t>(i)];
    cur = &holder;
  }
  return *cur;
}

OrderedJson ToTable(const ResourceType& rt, const OrderedJson& answer,
                    const std::vector<PrinterColumn>& columns, absl::Time now) {
  OrderedJson defs = OrderedJson::array();
  defs.push_back(Column("Name", "string", "name",
                        "Name must be unique within a namespace. Is required when creating "
                        "resources, although some resources may allow a client to request the "
                        "generation of an appropriate name automatically. Name is primarily "
                        "intended for creation idempotence and configuration definition. Cannot "
                        "be updated. More info: "
                        "http://kubernetes.io/docs/user-guide/identifiers#names",
                        0));
  const bool pods = rt.group.empty() && rt.plural == "pods";
  if (pods) {
    defs.push_back(Column("Ready", "string", "",
                          "The aggregate readiness state of this pod for accepting traffic.", 0));
    defs.push_back(Column("Status", "string", "", "The aggregate status of the containers.", 0));
    defs.push_back(Column("Restarts", "integer", "",
                          "The number of times the containers in this pod have been restarted.",
                          0));
    defs.push_back(Column("Age", "string", "", "CreationTimestamp", 0));
    defs.push_back(Column("IP", "string", "", "IP address allocated to the pod.", 1));
    defs.push_back(Column("Node", "string", "", "Name of the node the pod is assigned to.", 1));
    defs.push_back(Column("Nominated Node", "string", "", "Nominated node name.", 1));
    defs.push_back(Column("Readiness Gates", "string", "", "Pod readiness gates.", 1));
  } else if (rt.custom) {
    for (const PrinterColumn& c : columns) {
      defs.push_back(Column(c.name, c.type, c.format, c.description, c.priority));
    }
  } else {
    defs.push_back(Column("Age", "string", "", "CreationTimestamp", 0));
  }

  std::vector<const OrderedJson*> objects;
  const bool list = answer.contains("items") && answer["items"].is_array();
  if (list) {
    for (const OrderedJson& item : answer["items"]) objects.push_back(&item);
  } else {
    objects.push_back(&answer);
  }
  OrderedJson rows = OrderedJson::array();
  for (const OrderedJson* obj : objects) {
    OrderedJson cells = OrderedJson::array();
    cells.push_back(Str(*obj, {"metadata", "name"}));
    if (pods) {
      for (OrderedJson& c : PodCells(*obj, now)) cells.push_back(std::move(c));
    } else if (rt.custom) {
      for (const PrinterColumn& c : columns) {
        OrderedJson v = JsonPathValue(*obj, c.json_path);
        cells.push_back(c.type == "date" ? DateCell(v, now) : v);
      }
    } else {
      cells.push_back(Age(*obj, now));
    }
    OrderedJson meta = OrderedJson::object();
    meta["kind"] = "PartialObjectMetadata";
    meta["apiVersion"] = "meta.k8s.io/v1";
    meta["metadata"] = obj->contains("metadata") ? (*obj)["metadata"] : OrderedJson::object();
    rows.push_back({{"cells", cells}, {"object", meta}});
  }
  OrderedJson table = OrderedJson::object();
  table["kind"] = "Table";
  table["apiVersion"] = "meta.k8s.io/v1";
  OrderedJson metadata = OrderedJson::object();
  if (list && answer.contains("metadata")) {
    for (const char* k : {"resourceVersion", "continue", "remainingItemCount"}) {
      if (answer["metadata"].contains(k)) metadata[k] = answer["metadata"][k];
    }
  } else {
    const std::string rv = Str(answer, {"metadata", "resourceVersion"});
    if (!rv.empty()) metadata["resourceVersion"] = rv;
  }
  table["metadata"] = metadata;
  table["columnDefinitions"] = defs;
  table["rows"] = rows;
  return table;
}

}  // namespace kubetrain::testing
