#!/bin/bash
# The shipped RBAC is enough, checked by a real authorizer: deploy/base applied to a real
# control plane (label realapi), then kubetrain-operator run outside the cluster as its
# service account (the token of kubetrain-system/kubetrain-operator) makes the webhook's
# certificate in its Secret, sets the ValidatingWebhookConfiguration's caBundle, reads the
# TrainingJob a scale names, and the API server refuses `kubectl scale` above maxReplicas
# through it; the caBundle comes back after it is cleared. The packaging tests compare the
# grants with the source; this one runs them.
#
#   operator_rbac_realapi_test.sh SOURCE_DIR OPERATOR_BINARY
#
# Cluster-wide objects of deploy/base are created and deleted here, so it runs only on a
# control plane the realapi fixture started (never on an existing cluster), and the webhook
# configuration is narrowed to this test's namespace (other realapi tests run alongside).
set -euo pipefail
ROOT=$1 OPERATOR=$2
[ -n "${KUBETRAIN_TEST_KUBECONFIG:-}" ] || { echo "SKIP: no KUBETRAIN_TEST_KUBECONFIG"; exit 77; }
source_kind=$(cut -d' ' -f1 "$(dirname "$KUBETRAIN_TEST_KUBECONFIG")/source" 2>/dev/null || echo kubeconfig)
if [ "$source_kind" = kubeconfig ]; then
  echo "SKIP: an existing cluster (KUBETRAIN_TEST_KUBECONFIG): deploy/base's cluster-wide objects are not ours to replace there"
  exit 77
fi
export KUBECONFIG=$KUBETRAIN_TEST_KUBECONFIG
K=$ROOT/.cache/tools/bin/kubectl
[ -x "$K" ] || K=$(command -v kubectl) || { echo "SKIP: no kubectl (scripts/setup.sh)"; exit 77; }
work=$(mktemp -d)
NS=kt-rbac-$RANDOM$RANDOM
op_pid=
cleanup() {
  [ -z "$op_pid" ] || { kill -TERM "$op_pid" 2>/dev/null; wait "$op_pid" 2>/dev/null || true; }
  "$K" delete --ignore-not-found --wait=false -f "$work/base.json" >/dev/null 2>&1 || true
  "$K" delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- operator log"; cat "$work/operator.log" 2>/dev/null; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$K" create namespace "$NS" >/dev/null
"$K" label namespace "$NS" "kubetrain-rbac-test=$NS" >/dev/null
# deploy/base as shipped, but for two changes this machine needs: the webhook is called by url
# on loopback (the operator is no pod behind the Service here) and only for this namespace.
"$K" kustomize "$ROOT/deploy/base" | "$K" create --dry-run=client --validate=false -o json -f - |
  python3 -c '
import json, sys
port, ns = sys.argv[1], sys.argv[2]
text, objects, at = sys.stdin.read(), [], 0
while text[at:].strip():  # kubectl prints one JSON object after another
    at += len(text[at:]) - len(text[at:].lstrip())
    d, at = json.JSONDecoder().raw_decode(text, at)
    objects.append(d)
kept = []
for d in objects:
    if d["kind"] == "CustomResourceDefinition":
        continue  # the fixture installed it
    if d["kind"] == "ValidatingWebhookConfiguration":
        for w in d["webhooks"]:
            w["clientConfig"] = {"url": "https://127.0.0.1:%s/validate-kubetrain-io-v1alpha1-trainingjob" % port}
            w["namespaceSelector"] = {"matchLabels": {"kubetrain-rbac-test": ns}}
    if d["kind"] == "Deployment":
        d["spec"]["replicas"] = 0  # no pods: the operator runs here, as the service account
    kept.append(d)
json.dump({"apiVersion": "v1", "kind": "List", "items": kept}, sys.stdout)
' "$port" "$NS" >"$work/base.json"
"$K" apply --validate=false -f "$work/base.json" >/dev/null
token_secret=
for _ in $(seq 1 100); do
  token_secret=$("$K" -n kubetrain-system get sa kubetrain-operator -o jsonpath='{.secrets[0].name}' 2>/dev/null || true)
  [ -n "$token_secret" ] && break
  sleep 0.1
done
[ -n "$token_secret" ] || fail "no token Secret for serviceaccount kubetrain-system/kubetrain-operator"
token=$("$K" -n kubetrain-system get secret "$token_secret" -o jsonpath='{.data.token}' | base64 -d)
server=$("$K" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$("$K" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
cat >"$work/sa-kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$server", certificate-authority-data: "$ca"}}]
users: [{name: sa, user: {token: "$token"}}]
contexts: [{name: c, context: {cluster: c, user: sa, namespace: kubetrain-system}}]
current-context: c
KC
# The Deployment's flags, with addresses for this machine, and its controller kept to this
# test's namespace (other realapi tests' jobs share the control plane; the ClusterRole grants
# the same either way).
"$OPERATOR" --kubeconfig "$work/sa-kubeconfig" --leader-election-namespace=kubetrain-system \
  --namespace "$NS" \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  --webhook-bind-address "127.0.0.1:$port" --webhook-host 127.0.0.1 \
  --webhook-service-name=kubetrain-webhook --webhook-config-name=kubetrain-validating-webhook \
  --webhook-secret-name=kubetrain-webhook-cert --progress-interval 0 >"$work/operator.log" 2>&1 &
op_pid=$!
bundle() { "$K" get validatingwebhookconfiguration kubetrain-validating-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}'; }
for _ in $(seq 1 150); do
  [ -n "$(bundle)" ] && break
  kill -0 "$op_pid" 2>/dev/null || fail "the operator exited"
  sleep 0.2
done
[ -n "$(bundle)" ] || fail "no caBundle set within 30 s"
[ "$("$K" -n kubetrain-system get secret kubetrain-webhook-cert -o jsonpath='{.type}')" = kubernetes.io/tls ] ||
  fail "no Secret kubetrain-system/kubetrain-webhook-cert of type kubernetes.io/tls"
echo "the operator, as kubetrain-system/kubetrain-operator, stored its certificate and set the caBundle"
"$K" apply -n "$NS" -f - >/dev/null <<'JOB'
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: fm}
spec:
  elasticPolicy: {minReplicas: 2, maxReplicas: 4}
  replicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: ExitCode
      template: {spec: {containers: [{name: main, image: kubetrain:test}]}}
JOB
if out=$("$K" -n "$NS" scale tj/fm --replicas=6 2>&1); then fail "scale to 6 above maxReplicas 4 accepted: $out"; fi
grep -q 'spec.replicas: Invalid value: 6: 6 is above spec.elasticPolicy.maxReplicas 4' <<<"$out" ||
  fail "scale to 6 refused, but not by the webhook: $out"
echo "scale to 6 refused: $out"
"$K" -n "$NS" scale tj/fm --replicas=3 >/dev/null || fail "scale to 3 within [2, 4] refused"
# Cleared (as a re-apply of an older manifest would): set again within the keeper's 10 s.
"$K" patch validatingwebhookconfiguration kubetrain-validating-webhook --type=json \
  -p '[{"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}]' >/dev/null
for _ in $(seq 1 100); do [ -n "$(bundle)" ] && break; sleep 0.2; done
[ -n "$(bundle)" ] || fail "the caBundle did not come back within 20 s"
# An RBAC refusal names the service account.
if grep -E 'forbidden: User "system:serviceaccount:kubetrain-system:kubetrain-operator" cannot' \
  "$work/operator.log"; then
  fail "the operator was refused something"
fi
echo "the caBundle came back; no request of the operator was forbidden"
