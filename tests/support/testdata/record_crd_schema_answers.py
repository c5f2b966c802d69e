#!/usr/bin/env python3
"""Records what a real kube-apiserver answers to crd_schema_cases.json.

A developer tool, not run by the tests: structural_schema_test replays the
cases on the API emulator and checks its answers against the recording
(crd_schema_real_server.json), and against a real server too when
KUBETRAIN_TEST_KUBECONFIG is set. Re-record after changing the CRD:

  ../shared/tools/kube-control-plane/start.sh /tmp/kcp
  kubectl --kubeconfig /tmp/kcp/kubeconfig apply --validate=false -f crds/
  tests/support/testdata/record_crd_schema_answers.py /tmp/kcp > \
      tests/support/testdata/crd_schema_real_server.json

STATE_DIR is start.sh's state folder (kubeconfig, pki/admin.token, pki/apiserver.crt).
"""
import json, os, re, ssl, sys, urllib.request, urllib.error, uuid

state = sys.argv[1]
server = re.search(r"server: (\S+)", open(os.path.join(state, "kubeconfig")).read()).group(1)
token = open(os.path.join(state, "pki/admin.token")).read().strip()
ctx = ssl.create_default_context(cafile=os.path.join(state, "pki/apiserver.crt"))
here = os.path.dirname(os.path.abspath(__file__))
cases = json.load(open(os.path.join(here, "crd_schema_cases.json")))


def call(method, path, body, ctype="application/json"):
    req = urllib.request.Request(server + path, method=method, data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token, "Content-Type": ctype,
                                          "Accept": "application/json", "User-Agent": "kt-recorder"})
    try:
        with urllib.request.urlopen(req, context=ctx) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


ns = "kt-rec-" + uuid.uuid4().hex[:6]
call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
tj = "/apis/kubetrain.io/v1alpha1/namespaces/%s/trainingjobs" % ns
valid = {"replicaSpecs": {"Worker": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}}
out = []
for case in cases:
    name = case["name"]
    base = {"apiVersion": "kubetrain.io/v1alpha1", "kind": "TrainingJob", "metadata": {"name": name}}
    if case["write"] == "create":
        code, answer = call("POST", tj, dict(base, **case["body"]))
    else:
        call("POST", tj, dict(base, spec=valid))
        code, answer = call("PATCH", "%s/%s/status" % (tj, name), case["body"],
                            "application/merge-patch+json")
    rec = {"name": name, "code": code}
    if code >= 300:
        rec["causes"] = sorted(answer.get("details", {}).get("causes", []),
                               key=lambda c: (c.get("field", ""), c.get("message", "")))
    else:
        for k in ("spec", "status"):
            if k in answer:
                rec[k] = answer[k]
    out.append(rec)
call("DELETE", "/api/v1/namespaces/" + ns, {})
json.dump(out, sys.stdout, indent=1, sort_keys=True)
sys.stdout.write("\n")
