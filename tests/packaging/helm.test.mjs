// The Helm chart: lint, render with default and non-default values, parse
// every object and check what matters (kinds, security context, flags,
// least-privilege RBAC, namespace-scoped mode, monitoring, the dashboard
// ConfigMap, values.schema.json, NOTES.txt's first job against the CRD).
import {test} from 'node:test'
import assert from 'node:assert/strict'
import {execFileSync} from 'node:child_process'
import {cpSync, lstatSync, mkdtempSync, mkdirSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {CrdValidator, loadYamlDocuments, loadYamlFile} from '../../tools/node/lib/crd.mjs'
import {CHART, ROOT, helmTemplate, key, requireTool, run} from './tools.mjs'
import {requiredNamedRules, requiredRules} from './operator_rbac.mjs'

const helm = requireTool('helm')
const VALUES = join(ROOT, 'tests/packaging/values')
const valueFiles = readdirSync(VALUES).filter((f) => f.endsWith('.yaml')).sort()

// The operator's permissions: exactly the calls in its source (rbac.test.mjs
// checks each Role on its own; here every rendered role together), the
// webhook's certificate objects by their names for release `fullname`.
function expectedRules(options = {}, fullname = 'kubetrain') {
  const names = {'--webhook-secret-name': `${fullname}-webhook-cert`, '--webhook-config-name': `${fullname}-validating-webhook`}
  const named = requiredNamedRules(ROOT, {names, ...options})
  const out = {...requiredRules(ROOT, options)}
  for (const [k, v] of [...Object.entries(named.namespaced), ...Object.entries(named.cluster)]) {
    out[k] = [...new Set([...(out[k] ?? []), ...v])].sort()
  }
  return out
}
const EXPECTED_RULES = expectedRules()

// The ClusterRoles aggregated into the built-in edit/view roles (for users,
// not the operator; rbac.test.mjs checks their rules).
const isAggregated = (o) => Object.keys(o.metadata.labels ?? {}).some((l) => l.startsWith('rbac.authorization.k8s.io/aggregate-to-'))

// group/resource (group/resource:name for a rule with resourceNames) ->
// sorted verbs, over every Role and ClusterRole rendered for the operator.
function grantedRules(objs) {
  const out = {}
  for (const o of objs.filter((x) => (x.kind === 'Role' || x.kind === 'ClusterRole') && !isAggregated(x))) {
    for (const r of o.rules) {
      assert.ok(!r.nonResourceURLs, `${key(o)}: unexpected rule ${JSON.stringify(r)}`)
      for (const g of r.apiGroups) {
        for (const res of r.resources) {
          assert.ok(g !== '*' && res !== '*' && !r.verbs.includes('*'), `${key(o)}: wildcard in ${JSON.stringify(r)}`)
          for (const name of r.resourceNames ?? [undefined]) {
            const k = name === undefined ? `${g}/${res}` : `${g}/${res}:${name}`
            out[k] = [...new Set([...(out[k] ?? []), ...r.verbs])].sort()
          }
        }
      }
    }
  }
  return out
}
const sortedRules = (rules) => Object.fromEntries(Object.entries(rules).map(([k, v]) => [k, [...v].sort()]))

function only(objs, kind) {
  const found = objs.filter((o) => o.kind === kind)
  assert.equal(found.length, 1, `expected one ${kind}, found ${found.length}`)
  return found[0]
}

// The one object of this kind and name.
function named(objs, kind, name) {
  const found = objs.filter((o) => o.kind === kind && o.metadata.name === name)
  assert.equal(found.length, 1, `expected one ${kind} ${name}, found ${found.length}`)
  return found[0]
}

test('helm lint --strict passes with default and every values file', () => {
  run(helm, ['lint', '--strict', CHART])
  for (const f of valueFiles) run(helm, ['lint', '--strict', CHART, '--values', join(VALUES, f)])
})

test('values.schema.json refuses bad values', () => {
  for (const set of ['operator.logFormat=xml', 'operator.gangScheduler=kueue', 'watchNamespace=Bad_NS',
    'operator.leaderElection.leaseDuration=soon', 'unknownTopLevel=1', 'metrics.service.port=0',
    'prometheusRule.enabled=yes', 'rbac.aggregateToDefaultRoles=1', 'operator.podDisruptionBudget.maxUnavailable=1',
    'webhook.enabled=yes', 'webhook.port=8081', 'webhook.port=0', 'webhook.failurePolicy=Retry', 'webhook.timeoutSeconds=31',
    'webhook.existingCertSecret=Bad_Name', 'webhook.injectCaFrom=no-namespace', 'webhook.caBundle=not base64!',
    'webhook.namespaceSelector.matchNames={a}', 'webhook.certDir=/tls']) {
    const out = run(helm, ['template', 'x', CHART, '--set', set], {expectFailure: true})
    assert.match(out, /values don't meet the specifications of the schema|schema/, set)
  }
})

test('more than one replica needs leader election', () => {
  const out = run(helm, ['template', 'x', CHART, '--set', 'operator.replicas=2', '--set', 'operator.leaderElection.enabled=false'],
    {expectFailure: true})
  assert.match(out, /operator.replicas > 1 needs operator.leaderElection.enabled/)
  // One replica without it is fine (no-leader-election.yaml renders).
  helmTemplate(helm, {values: join(VALUES, 'no-leader-election.yaml')})
})

test('the chart CRD is byte-identical to crds/', () => {
  assert.deepEqual(readdirSync(join(CHART, 'crds')), ['kubetrain.io_trainingjobs.yaml'])
  const a = readFileSync(join(CHART, 'crds/kubetrain.io_trainingjobs.yaml'))
  const b = readFileSync(join(ROOT, 'crds/kubetrain.io_trainingjobs.yaml'))
  assert.ok(a.equals(b), 'charts/kubetrain/crds/kubetrain.io_trainingjobs.yaml differs from crds/: cp crds/kubetrain.io_trainingjobs.yaml charts/kubetrain/crds/')
})

test('every rendered object parses and is complete', () => {
  for (const f of [undefined, ...valueFiles.map((v) => join(VALUES, v))]) {
    const objs = helmTemplate(helm, {values: f, crds: true})
    assert.ok(objs.length >= 6, f)
    const seen = new Set()
    for (const o of objs) {
      assert.ok(o.apiVersion && o.kind && o.metadata?.name, `${f}: incomplete object ${JSON.stringify(o).slice(0, 200)}`)
      assert.ok(!seen.has(key(o)), `${f}: ${key(o)} twice`)
      seen.add(key(o))
    }
  }
})

test('default values: kinds, deployment, security, RBAC', () => {
  const objs = helmTemplate(helm, {crds: true})
  assert.deepEqual(objs.map((o) => o.kind).sort(), ['ClusterRole', 'ClusterRole', 'ClusterRole', 'ClusterRole',
    'ClusterRoleBinding', 'ClusterRoleBinding', 'CustomResourceDefinition', 'Deployment', 'Role', 'Role', 'RoleBinding',
    'RoleBinding', 'Service', 'Service', 'ServiceAccount', 'ValidatingWebhookConfiguration'])
  assert.deepEqual(objs.filter(isAggregated).map((o) => o.metadata.name).sort(), ['kubetrain-edit', 'kubetrain-view'])
  assert.deepEqual(only(objs, 'CustomResourceDefinition'), loadYamlFile(join(ROOT, 'crds/kubetrain.io_trainingjobs.yaml'))[0])

  const dep = only(objs, 'Deployment')
  assert.equal(dep.metadata.name, 'kubetrain-operator')
  assert.equal(dep.metadata.namespace, 'kubetrain-system')
  const pod = dep.spec.template.spec
  assert.equal(pod.serviceAccountName, only(objs, 'ServiceAccount').metadata.name)
  assert.equal(pod.securityContext.runAsNonRoot, true)
  assert.ok(pod.securityContext.runAsUser > 0)
  assert.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault')
  assert.equal(pod.containers.length, 1)
  const c = pod.containers[0]
  assert.equal(c.image, 'kubetrain-operator:0.1.0')
  assert.deepEqual(c.command, ['/usr/local/bin/kubetrain-operator'])
  // Scraped by deploy/prometheus/scrape-config.yaml (its pod discovery keeps
  // pods annotated prometheus.io/scrape and scrapes prometheus.io/port).
  const ann = dep.spec.template.metadata.annotations
  assert.equal(ann['prometheus.io/scrape'], 'true')
  assert.equal(ann['prometheus.io/port'], String(c.ports.find((p) => p.name === 'metrics').containerPort))
  assert.equal(ann['prometheus.io/path'], '/metrics')
  assert.equal(dep.spec.replicas, 1)
  assert.equal(pod.topologySpreadConstraints, undefined, 'one replica: no spread')
  assert.deepEqual(c.securityContext, {
    allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true,
    capabilities: {drop: ['ALL']}, seccompProfile: {type: 'RuntimeDefault'},
  })
  assert.deepEqual(c.args, ['--leader-elect=true', '--leader-election-id=kubetrain-operator',
    '--leader-election-namespace=kubetrain-system', '--lease-duration=15s', '--renew-deadline=10s',
    '--retry-period=2s', '--metrics-bind-address=:8080', '--health-probe-bind-address=:8081', '--workers=16',
    '--kube-api-qps=20', '--kube-api-burst=30', '--gang-scheduler=', '--progress-interval=30s', '--log-format=json', '--log-level=info',
    '--webhook-bind-address=:9443', '--webhook-service-name=kubetrain-webhook',
    '--webhook-config-name=kubetrain-validating-webhook', '--webhook-secret-name=kubetrain-webhook-cert'])
  assert.deepEqual(c.ports.map((p) => [p.name, p.containerPort]), [['metrics', 8080], ['health', 8081], ['webhook', 9443]])
  assert.deepEqual([c.livenessProbe.httpGet.path, c.livenessProbe.httpGet.port], ['/healthz', 'health'])
  assert.deepEqual([c.readinessProbe.httpGet.path, c.readinessProbe.httpGet.port], ['/readyz', 'health'])
  assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory)
  for (const k of Object.keys(dep.spec.selector.matchLabels)) {
    assert.equal(dep.spec.template.metadata.labels[k], dep.spec.selector.matchLabels[k])
  }

  const svc = named(objs, 'Service', 'kubetrain-operator-metrics')
  assert.deepEqual(svc.spec.ports, [{name: 'metrics', port: 8080, targetPort: 'metrics', protocol: 'TCP'}])
  assert.deepEqual(svc.spec.selector, dep.spec.selector.matchLabels)

  assert.deepEqual(grantedRules(objs), sortedRules(EXPECTED_RULES))
  const crb = named(objs, 'ClusterRoleBinding', 'kubetrain-operator')
  assert.equal(crb.roleRef.name, named(objs, 'ClusterRole', 'kubetrain-operator').metadata.name)
  assert.deepEqual(crb.subjects, [{kind: 'ServiceAccount', name: 'kubetrain-operator', namespace: 'kubetrain-system'}])
  const le = named(objs, 'Role', 'kubetrain-operator-leader-election')
  assert.equal(le.metadata.namespace, 'kubetrain-system')
  assert.deepEqual(grantedRules([le]), {'coordination.k8s.io/leases': EXPECTED_RULES['coordination.k8s.io/leases']})
})

// Cluster-scoped objects besides the CRD: in a namespaced install only the
// webhook's configuration and the ClusterRole for its caBundle.
const clusterScoped = (objs) => objs.filter((o) => o.kind.startsWith('Cluster') || o.kind === 'ValidatingWebhookConfiguration')
  .map((o) => `${o.kind}/${o.metadata.name}`).sort()

test('namespace-scoped mode: Role and RoleBinding in that namespace, no ClusterRole but the webhook\'s, --namespace', () => {
  const objs = helmTemplate(helm, {values: join(VALUES, 'namespaced.yaml')})
  assert.deepEqual(clusterScoped(objs), ['ClusterRole/kubetrain-operator-webhook', 'ClusterRoleBinding/kubetrain-operator-webhook',
    'ValidatingWebhookConfiguration/kubetrain-validating-webhook'])
  const roles = objs.filter((o) => o.kind === 'Role')
  assert.deepEqual(roles.map((r) => `${r.metadata.namespace}/${r.metadata.name}`).sort(),
    ['kubetrain-jobs/kubetrain-operator', 'kubetrain-system/kubetrain-operator-leader-election',
      'kubetrain-system/kubetrain-operator-webhook'])
  assert.deepEqual(grantedRules(objs), sortedRules(expectedRules({namespaced: true})))
  // The webhook checks only the watched namespace's jobs.
  assert.deepEqual(only(objs, 'ValidatingWebhookConfiguration').webhooks[0].namespaceSelector,
    {matchLabels: {'kubernetes.io/metadata.name': 'kubetrain-jobs'}})
  assert.equal(clusterScoped(helmTemplate(helm, {values: join(VALUES, 'namespaced.yaml'), set: ['webhook.enabled=false']})).length, 0,
    'without the webhook, no cluster-scoped object')
  const rb = objs.find((o) => o.kind === 'RoleBinding' && o.metadata.namespace === 'kubetrain-jobs')
  assert.deepEqual(rb.roleRef, {apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'kubetrain-operator'})
  assert.deepEqual(rb.subjects, [{kind: 'ServiceAccount', name: 'kubetrain-operator', namespace: 'kubetrain-system'}])
  const args = only(objs, 'Deployment').spec.template.spec.containers[0].args
  assert.ok(args.includes('--namespace=kubetrain-jobs'), args.join(' '))
})

test('without leader election: no Lease permissions and --leader-elect=false', () => {
  const objs = helmTemplate(helm, {values: join(VALUES, 'no-leader-election.yaml')})
  const expected = {...EXPECTED_RULES}
  delete expected['coordination.k8s.io/leases']
  assert.deepEqual(grantedRules(objs), sortedRules(expected))
  // The webhook's Secret: in the service account's namespace, where the
  // operator looks without --leader-election-namespace.
  assert.equal(named(objs, 'Role', 'kubetrain-operator-webhook').metadata.namespace, 'kubetrain-system')
  const args = only(objs, 'Deployment').spec.template.spec.containers[0].args
  assert.equal(args[0], '--leader-elect=false')
  assert.ok(!args.some((a) => a.startsWith('--leader-election-') || a.startsWith('--lease-')))
})

// The admission webhook (operator/webhook/): the Service to every operator
// replica, the ValidatingWebhookConfiguration with the operator's path and
// name, the flags; the operator's own certificate by default, a mounted one
// with existingCertSecret (then no Secret or caBundle permissions), none of
// it with webhook.enabled false.
test('the admission webhook: Service, configuration, flags and port; a mounted certificate; none of it when off', () => {
  const objs = helmTemplate(helm)
  const dep = only(objs, 'Deployment')
  const c = dep.spec.template.spec.containers[0]
  const svc = named(objs, 'Service', 'kubetrain-webhook')
  assert.equal(svc.metadata.namespace, 'kubetrain-system')
  assert.deepEqual(svc.spec.ports, [{name: 'webhook', port: 443, targetPort: 'webhook', protocol: 'TCP'}])
  assert.deepEqual(svc.spec.selector, dep.spec.selector.matchLabels)
  for (const [k, v] of Object.entries(svc.spec.selector)) assert.equal(dep.spec.template.metadata.labels[k], v)
  assert.deepEqual(c.ports.find((p) => p.name === 'webhook'), {name: 'webhook', containerPort: 9443, protocol: 'TCP'})
  assert.equal(svc.metadata.labels['app.kubernetes.io/component'], 'webhook')
  // Probes unchanged: the webhook is HTTPS on its own port, served by every
  // replica (standbys are Ready, docs/operator.md "Probes").
  assert.deepEqual([c.readinessProbe.httpGet.port, c.livenessProbe.httpGet.port], ['health', 'health'])

  const vwc = only(objs, 'ValidatingWebhookConfiguration')
  assert.equal(vwc.metadata.name, 'kubetrain-validating-webhook')
  assert.equal(vwc.metadata.annotations, undefined)
  assert.deepEqual(vwc.webhooks, [{
    name: 'validate.trainingjobs.kubetrain.io', admissionReviewVersions: ['v1'], sideEffects: 'None',
    failurePolicy: 'Fail', timeoutSeconds: 10,
    // No caBundle: the operator sets it.
    clientConfig: {service: {name: 'kubetrain-webhook', namespace: 'kubetrain-system',
      path: '/validate-kubetrain-io-v1alpha1-trainingjob', port: 443}},
    // Not trainingjobs/status: the operator's status writes never wait for it.
    rules: [{apiGroups: ['kubetrain.io'], apiVersions: ['v1alpha1'], operations: ['UPDATE'],
      resources: ['trainingjobs', 'trainingjobs/scale'], scope: 'Namespaced'}],
  }])
  // The operator's own names: its path and webhook name, and its flags'
  // defaults, which the chart's names for release kubetrain equal.
  const server = readFileSync(join(ROOT, 'operator/webhook/webhook_server.h'), 'utf8')
  assert.match(server, /kValidatePath\[\] = "\/validate-kubetrain-io-v1alpha1-trainingjob";/)
  assert.match(server, /kWebhookName\[\] = "validate\.trainingjobs\.kubetrain\.io";/)
  const options = readFileSync(join(ROOT, 'operator/operator_options.cc'), 'utf8')
  for (const [field, value] of [['webhook_bind_address', ':9443'], ['webhook_secret_name', 'kubetrain-webhook-cert'],
    ['webhook_service_name', 'kubetrain-webhook'], ['webhook_config_name', 'kubetrain-validating-webhook']]) {
    assert.ok(options.includes(`std::string ${field} = "${value}";`), `${field} default is no longer ${value}`)
  }

  // Off: --webhook-bind-address=0 and nothing else of it.
  const off = helmTemplate(helm, {values: join(VALUES, 'no-webhook.yaml')})
  const offArgs = only(off, 'Deployment').spec.template.spec.containers[0].args
  assert.deepEqual(offArgs.filter((a) => a.startsWith('--webhook-')), ['--webhook-bind-address=0'])
  assert.equal(only(off, 'Deployment').spec.template.spec.containers[0].ports.find((p) => p.name === 'webhook'), undefined)
  assert.deepEqual(off.filter((o) => o.kind === 'ValidatingWebhookConfiguration' || o.metadata.name.endsWith('webhook')).map(key), [])
  assert.deepEqual(grantedRules(off), sortedRules(expectedRules({webhook: false})))
  assert.ok(!grantedRules(off)['kubetrain.io/trainingjobs'].includes('get'), 'no get on TrainingJobs without the webhook')

  // A certificate from a Secret (cert-manager's): mounted read-only, passed
  // as --webhook-cert-dir; the operator keeps no Secret, sets no caBundle.
  const cm = helmTemplate(helm, {values: join(VALUES, 'cert-manager.yaml')})
  const cmPod = only(cm, 'Deployment').spec.template.spec
  const cmArgs = cmPod.containers[0].args
  assert.deepEqual(cmArgs.filter((a) => a.startsWith('--webhook-')),
    ['--webhook-bind-address=:9443', '--webhook-cert-dir=/etc/kubetrain/webhook-tls'])
  assert.deepEqual(cmPod.volumes, [{name: 'webhook-tls', secret: {secretName: 'kubetrain-webhook-tls'}}])
  assert.deepEqual(cmPod.containers[0].volumeMounts, [{name: 'webhook-tls', mountPath: '/etc/kubetrain/webhook-tls', readOnly: true}])
  const cmVwc = only(cm, 'ValidatingWebhookConfiguration')
  assert.deepEqual(cmVwc.metadata.annotations, {'cert-manager.io/inject-ca-from': 'kubetrain-system/kubetrain-webhook'})
  assert.equal(cmVwc.webhooks[0].clientConfig.caBundle, undefined)
  assert.deepEqual(grantedRules(cm), sortedRules(expectedRules({webhookCertSecret: 'kubetrain-webhook-tls'})))
  assert.equal(cm.filter((o) => o.kind.endsWith('Role') && o.metadata.name.endsWith('-webhook')).length, 0)
  assert.equal(only(helmTemplate(helm).filter((o) => o.kind === 'Deployment'), 'Deployment').spec.template.spec.volumes, undefined)
  // Or a caBundle of one's own.
  const own = helmTemplate(helm, {set: ['webhook.existingCertSecret=tls', 'webhook.caBundle=Zm9v']})
  assert.equal(only(own, 'ValidatingWebhookConfiguration').webhooks[0].clientConfig.caBundle, 'Zm9v')
  // Either without a mounted certificate would fight the operator's caBundle.
  for (const set of ['webhook.injectCaFrom=a/b', 'webhook.caBundle=Zm9v']) {
    const out = run(helm, ['template', 'x', CHART, '--set', set], {expectFailure: true})
    assert.match(out, /need webhook.existingCertSecret/, set)
  }
})

test('monitoring: ServiceMonitor on the metrics port, PodMonitor on job pods, the dashboard', () => {
  assert.equal(helmTemplate(helm).filter((o) => o.apiVersion.startsWith('monitoring.coreos.com')).length, 0)
  const objs = helmTemplate(helm, {values: join(VALUES, 'monitoring.yaml')})
  const sm = only(objs, 'ServiceMonitor')
  assert.deepEqual(sm.spec.endpoints.map((e) => [e.port, e.path]), [['metrics', '/metrics']])
  const metricsSvc = named(objs, 'Service', 'kubetrain-operator-metrics')
  assert.deepEqual(sm.spec.selector.matchLabels, metricsSvc.spec.selector)
  for (const k of Object.keys(sm.spec.selector.matchLabels)) {
    assert.equal(metricsSvc.metadata.labels[k], sm.spec.selector.matchLabels[k])
  }
  // ... and only that Service (not the webhook's: component webhook).
  const selects = (svc) => Object.entries(sm.spec.selector.matchLabels).every(([k, v]) => svc.metadata.labels[k] === v)
  assert.deepEqual(objs.filter((o) => o.kind === 'Service' && selects(o)).map((o) => o.metadata.name), ['kubetrain-operator-metrics'])
  const pm = only(objs, 'PodMonitor')
  assert.deepEqual(pm.spec.selector.matchExpressions, [{key: 'kubetrain.io/job-name', operator: 'Exists'}])
  // The runtime's port by name (the operator's kt-metrics, api/ports.h):
  // one endpoint, no address rewriting (which made one target per container
  // port), no honorLabels (the runtime's labels clash with no target label).
  assert.deepEqual(pm.spec.podMetricsEndpoints, [{port: 'kt-metrics', path: '/metrics', interval: '15s'}])
  assert.equal(sm.spec.endpoints[0].honorLabels, undefined)
  const ports = readFileSync(join(ROOT, 'api/ports.h'), 'utf8')
  assert.match(ports, /kMetricsPortName\[\] = "kt-metrics";/)
  assert.match(ports, /kMetricsPort = 8090;/)
  assert.equal(only(objs, 'ConfigMap').metadata.labels.grafana_dashboard, '1')
  // The alerts, as a PrometheusRule: exactly alert-rules.yaml's groups.
  const rule = only(objs, 'PrometheusRule')
  assert.equal(rule.metadata.name, 'kubetrain-alerts')
  assert.deepEqual(rule.spec, loadYamlFile(join(ROOT, 'deploy/prometheus/alert-rules.yaml'))[0])
})

test('the PrometheusRule reads alert-rules.yaml through a symlink', () => {
  const inChart = join(CHART, 'rules/kubetrain-alerts.yaml')
  assert.ok(lstatSync(inChart).isSymbolicLink(), `${inChart} is not a symlink`)
  assert.equal(readlinkSync(inChart), '../../../deploy/prometheus/alert-rules.yaml')
  assert.equal(helmTemplate(helm).filter((o) => o.kind === 'PrometheusRule').length, 0, 'off by default')
  const tmp = mkdtempSync(join(tmpdir(), 'kubetrain-chart-'))
  try {
    run(helm, ['package', CHART, '--destination', tmp])
    const tgz = readdirSync(tmp).find((f) => f.endsWith('.tgz'))
    const packed = execFileSync('tar', ['-xzOf', join(tmp, tgz), 'kubetrain/rules/kubetrain-alerts.yaml'], {encoding: 'utf8'})
    assert.equal(packed, readFileSync(join(ROOT, 'deploy/prometheus/alert-rules.yaml'), 'utf8'))
  } finally {
    rmSync(tmp, {recursive: true, force: true})
  }
})

test('replicas > 1: PodDisruptionBudget and a spread over nodes; security contexts from values', () => {
  const objs = helmTemplate(helm, {values: join(VALUES, 'openshift.yaml')})
  const dep = only(objs, 'Deployment')
  const pod = dep.spec.template.spec
  assert.equal(dep.spec.replicas, 2)
  const pdb = only(objs, 'PodDisruptionBudget')
  assert.equal(pdb.spec.minAvailable, 1)
  assert.deepEqual(pdb.spec.selector.matchLabels, dep.spec.selector.matchLabels)
  assert.deepEqual(pod.topologySpreadConstraints, [{maxSkew: 1, topologyKey: 'kubernetes.io/hostname',
    whenUnsatisfiable: 'ScheduleAnyway', labelSelector: {matchLabels: dep.spec.selector.matchLabels}}])
  // No fixed UID/GID: the cluster assigns one; still non-root, RuntimeDefault.
  assert.deepEqual(pod.securityContext, {runAsNonRoot: true, seccompProfile: {type: 'RuntimeDefault'}})
  assert.equal(helmTemplate(helm).filter((o) => o.kind === 'PodDisruptionBudget').length, 0, 'none with 1 replica')
})

test('every option away from its default renders as asked', () => {
  const objs = helmTemplate(helm, {values: join(VALUES, 'everything.yaml')})
  const dep = only(objs, 'Deployment')
  const c = dep.spec.template.spec.containers[0]
  assert.equal(dep.metadata.name, 'trainer-operator')
  assert.equal(dep.spec.replicas, 2)
  assert.equal(c.image, 'registry.example.com/ml/kubetrain:1.2.3')
  assert.equal(c.imagePullPolicy, 'Always')
  for (const a of ['--namespace=research', '--workers=8', '--gang-scheduler=volcano', '--leader-election-id=trainer-lock',
    '--leader-election-namespace=kube-system', '--lease-duration=30s', '--log-format=text']) {
    assert.ok(c.args.includes(a), `${a} missing from ${c.args.join(' ')}`)
  }
  assert.equal(dep.spec.template.spec.serviceAccountName, 'trainer-sa')
  assert.equal(only(objs, 'ServiceAccount').metadata.name, 'trainer-sa')
  assert.deepEqual(clusterScoped(objs), ['ClusterRole/trainer-operator-webhook', 'ClusterRoleBinding/trainer-operator-webhook',
    'ValidatingWebhookConfiguration/trainer-validating-webhook'])
  assert.equal(objs.find((o) => o.kind === 'Role' && o.metadata.name.endsWith('leader-election')).metadata.namespace, 'kube-system')
  // gangScheduler volcano: PodGroups too; namespaced: no Nodes.
  assert.deepEqual(grantedRules(objs), sortedRules(expectedRules({gangScheduler: 'volcano', namespaced: true}, 'trainer')))
  assert.equal(named(objs, 'Service', 'trainer-operator-metrics').spec.ports[0].port, 9090)
  // The webhook: its port, policy and selector; its Secret with the Lease in
  // kube-system, so the certificate also names the Service in the release namespace.
  for (const a of ['--webhook-bind-address=:10443', '--webhook-service-name=trainer-webhook',
    '--webhook-config-name=trainer-validating-webhook', '--webhook-secret-name=trainer-webhook-cert',
    '--webhook-host=trainer-webhook.kubetrain-system.svc']) {
    assert.ok(c.args.includes(a), `${a} missing from ${c.args.join(' ')}`)
  }
  assert.equal(named(objs, 'Role', 'trainer-operator-webhook').metadata.namespace, 'kube-system')
  assert.deepEqual(c.ports.find((p) => p.name === 'webhook').containerPort, 10443)
  const vwc = only(objs, 'ValidatingWebhookConfiguration')
  assert.deepEqual([vwc.webhooks[0].failurePolicy, vwc.webhooks[0].timeoutSeconds], ['Ignore', 5])
  assert.deepEqual(vwc.webhooks[0].namespaceSelector, {matchLabels: {team: 'ml'}})
  assert.equal(vwc.webhooks[0].clientConfig.service.name, 'trainer-webhook')
  assert.deepEqual(only(objs, 'PodMonitor').spec.namespaceSelector, {matchNames: ['research']})
  const pod = dep.spec.template.spec
  // Merged into the defaults (helm merges maps): fsGroup added.
  assert.deepEqual(pod.securityContext, {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532,
    seccompProfile: {type: 'RuntimeDefault'}, fsGroup: 1000})
  assert.deepEqual(c.securityContext, {allowPrivilegeEscalation: false, runAsNonRoot: true, readOnlyRootFilesystem: true,
    capabilities: {drop: ['ALL']}, seccompProfile: {type: 'RuntimeDefault'}})
  assert.equal(pod.topologySpreadConstraints[0].topologyKey, 'topology.kubernetes.io/zone')
  assert.equal(pod.topologySpreadConstraints.length, 1)
  assert.equal(only(objs, 'PodDisruptionBudget').spec.minAvailable, '50%')
  assert.equal(dep.spec.template.metadata.annotations['prometheus.io/scrape'], undefined)
  assert.equal(only(objs, 'PrometheusRule').metadata.labels.release, 'prom')
  assert.ok(c.args.includes('--gang-scheduler=volcano'))
})

// The chart reads the dashboard from dashboards/kubetrain-dashboard.json, a
// symlink to its one source, deploy/grafana/kubetrain-dashboard.json (helm
// follows it; `helm package` stores the file). The ConfigMap's data is the
// file's bytes exactly, as kustomize's configMapGenerator (deploy/grafana)
// gives them; kustomize.test.mjs compares the two objects.
test('the Grafana dashboard ConfigMap', () => {
  const source = join(ROOT, 'deploy/grafana/kubetrain-dashboard.json')
  const inChart = join(CHART, 'dashboards/kubetrain-dashboard.json')
  assert.ok(lstatSync(inChart).isSymbolicLink(), `${inChart} is not a symlink`)
  assert.equal(readlinkSync(inChart), '../../../deploy/grafana/kubetrain-dashboard.json')
  assert.equal(realpathSync(inChart), realpathSync(source))
  const dashboard = readFileSync(source, 'utf8')
  JSON.parse(dashboard)

  assert.equal(helmTemplate(helm).filter((o) => o.kind === 'ConfigMap').length, 0, 'off by default')
  const cm = only(helmTemplate(helm, {set: ['grafanaDashboard.enabled=true']}), 'ConfigMap')
  assert.equal(cm.metadata.name, 'kubetrain-dashboard')
  assert.equal(cm.metadata.labels.grafana_dashboard, '1')
  assert.equal(cm.data['kubetrain-dashboard.json'], dashboard, 'the ConfigMap holds the file byte for byte')

  const tmp = mkdtempSync(join(tmpdir(), 'kubetrain-chart-'))
  try {
    // helm package stores the file itself, not the link.
    run(helm, ['package', CHART, '--destination', tmp])
    const tgz = readdirSync(tmp).find((f) => f.endsWith('.tgz'))
    const packed = execFileSync('tar', ['-xzOf', join(tmp, tgz), 'kubetrain/dashboards/kubetrain-dashboard.json'], {encoding: 'utf8', maxBuffer: 64 << 20})
    assert.equal(packed, dashboard, 'the packaged chart holds the dashboard')

    const chart = join(tmp, 'kubetrain')
    cpSync(CHART, chart, {recursive: true, dereference: true})
    rmSync(join(chart, 'dashboards'), {recursive: true, force: true})
    // Without the file: nothing rendered, whatever the value says.
    const without = helmTemplate(helm, {chart, set: ['grafanaDashboard.enabled=true']})
    assert.equal(without.filter((o) => o.kind === 'ConfigMap').length, 0)
    // With or without a trailing newline, the data is the file exactly.
    mkdirSync(join(chart, 'dashboards'))
    for (const text of ['{"title": "a"}', '{"title": "b"}\n', '{\n  "title": "c"\n}\n']) {
      writeFileSync(join(chart, 'dashboards/kubetrain-dashboard.json'), text)
      const objs = helmTemplate(helm, {chart, set: ['grafanaDashboard.enabled=true']})
      assert.equal(only(objs, 'ConfigMap').data['kubetrain-dashboard.json'], text)
    }
  } finally {
    rmSync(tmp, {recursive: true, force: true})
  }
})

// The images: the operator's and the runtime's defaults, the tag the chart's
// appVersion; every example runs the runtime image (fmnist-gpu.yaml its CUDA
// build, tagged as docs/install.md builds it).
test('images: kubetrain-operator for the operator, kubetrain for jobs and examples', () => {
  const chart = loadYamlFile(join(CHART, 'Chart.yaml'))[0]
  const values = loadYamlFile(join(CHART, 'values.yaml'))[0]
  assert.equal(values.image.repository, 'kubetrain-operator')
  assert.equal(values.runtimeImage.repository, 'kubetrain')
  const runtime = `${values.runtimeImage.repository}:${chart.appVersion}`
  assert.equal(runtime, 'kubetrain:0.1.0')
  for (const f of readdirSync(join(ROOT, 'examples')).filter((x) => x.endsWith('.yaml'))) {
    const [job] = loadYamlFile(join(ROOT, 'examples', f))
    for (const [type, rs] of Object.entries(job.spec.replicaSpecs)) {
      for (const c of rs.template.spec.containers) {
        assert.equal(c.image, f === 'fmnist-gpu.yaml' ? 'kubetrain:cuda' : runtime, `${f} ${type}`)
      }
    }
  }
  assert.match(readFileSync(join(ROOT, 'docs/install.md'), 'utf8'), /kubetrain:0\.1\.0/)
})

// `helm install --dry-run` needs a cluster; render NOTES.txt through tpl in a
// copy of the chart instead.
test("NOTES.txt's first job is a valid TrainingJob", () => {
  const validator = CrdValidator.fromFile(join(ROOT, 'crds/kubetrain.io_trainingjobs.yaml'))
  const tmp = mkdtempSync(join(tmpdir(), 'kubetrain-notes-'))
  try {
    const chart = join(tmp, 'kubetrain')
    cpSync(CHART, chart, {recursive: true, dereference: true})
    cpSync(join(chart, 'templates/NOTES.txt'), join(chart, 'notes.txt'))
    writeFileSync(join(chart, 'templates/notes-for-test.yaml'),
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}\n')
    for (const set of [[], ['watchNamespace=kubetrain-jobs', 'runtimeImage.tag=v9']]) {
      const notes = helmTemplate(helm, {chart, set}).find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'notes').data.notes
      const job = notes.match(/<<'YAML'[^\n]*\n([\s\S]*?)\nYAML\n/)
      assert.ok(job, `no TrainingJob in NOTES:\n${notes}`)
      const [doc] = loadYamlDocuments(job[1], 'NOTES.txt')
      assert.deepEqual(validator.validate(doc).errors, [])
      assert.equal(doc.spec.replicaSpecs.Worker.template.spec.containers[0].image, set.length ? 'kubetrain:v9' : 'kubetrain:0.1.0')
      assert.match(notes, set.length ? /kubectl apply -n kubetrain-jobs -f -/ : /kubectl apply -f -/)
      assert.match(notes, /rollout status deployment\/kubetrain-operator/)
    }
  } finally {
    rmSync(tmp, {recursive: true, force: true})
  }
})
