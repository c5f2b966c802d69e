// RBAC from the code: the verbs kubetrain-operator's source really calls
// (operator_rbac.mjs reads operator/**/*.cc) are exactly what the chart's
// ClusterRole (or namespaced Role) and leader-election Role grant, and what
// deploy/base and deploy/overlays/namespaced grant: a missing verb fails as
// much as an unused one. The one permission no call shows is listed, with its
// reason, in operator_rbac.mjs's EXCEPTIONS. The admission webhook's own
// certificate Secret and ValidatingWebhookConfiguration (operator_rbac.mjs's
// NAMED) are granted by name in the -webhook Role (the operator's own
// namespace) and ClusterRole.
import {test} from 'node:test'
import assert from 'node:assert/strict'
import {join} from 'node:path'
import {loadYamlDocuments} from '../../tools/node/lib/crd.mjs'
import {readFileSync, readdirSync, statSync} from 'node:fs'
import {CONDITIONAL, EXCEPTIONS, NAMED, deriveOperatorRules, requiredNamedRules, requiredRules, scanSource, stripComments} from './operator_rbac.mjs'
import {ROOT, helmTemplate, key, requireTool, run} from './tools.mjs'

// Granted in the leader-election Role, in the lease's namespace; the NAMED
// calls (the webhook's certificate) in the -webhook Role and ClusterRole;
// everything else in the ClusterRole, or the Role of the watched namespace.
const LEADER_ELECTION = ['coordination.k8s.io/leases']

const required = requiredRules(ROOT)
const listFiles = (dir) => readdirSync(dir).flatMap((e) => {
  const p = join(dir, e)
  return statSync(p).isDirectory() ? listFiles(p) : [p]
})
const split = (rules, leader) =>
  Object.fromEntries(Object.entries(rules).filter(([k]) => LEADER_ELECTION.includes(k) === leader))
const LEADER_RULES = split(required, true)

// The webhook's objects by their default names (the operator's flag defaults,
// the chart's with release kubetrain, deploy/base's).
const NAMES = {'--webhook-secret-name': 'kubetrain-webhook-cert', '--webhook-config-name': 'kubetrain-validating-webhook'}
const WEBHOOK_RULES = requiredNamedRules(ROOT, {names: NAMES})

// The ClusterRoles aggregated into the built-in roles (not the operator's).
const AGGREGATE = /^rbac\.authorization\.k8s\.io\/aggregate-to-/
const isAggregated = (o) => Object.keys(o.metadata.labels ?? {}).some((l) => AGGREGATE.test(l))

// One Role or ClusterRole's rules as "group/resource" -> sorted verbs, a rule
// with resourceNames as "group/resource:name" (requiredNamedRules' form); each
// resource (and name) in one rule only, no verb twice, no wildcards.
function roleRules(role) {
  const out = {}
  for (const r of role.rules) {
    assert.ok(!r.nonResourceURLs, `${key(role)}: unexpected rule ${JSON.stringify(r)}`)
    assert.equal(new Set(r.verbs).size, r.verbs.length, `${key(role)}: a verb twice in ${JSON.stringify(r)}`)
    for (const g of r.apiGroups) {
      for (const res of r.resources) {
        assert.ok(g !== '*' && res !== '*' && !r.verbs.includes('*'), `${key(role)}: wildcard in ${JSON.stringify(r)}`)
        for (const name of r.resourceNames ?? [undefined]) {
          assert.ok(name === undefined || (typeof name === 'string' && name !== ''), `${key(role)}: bad resourceNames`)
          const k = name === undefined ? `${g}/${res}` : `${g}/${res}:${name}`
          assert.ok(!(k in out), `${key(role)}: ${k} in two rules`)
          out[k] = [...r.verbs].sort()
        }
      }
    }
  }
  return out
}

function only(objs, pred, what) {
  const found = objs.filter(pred)
  assert.equal(found.length, 1, `expected one ${what}, found ${found.map(key).join(', ') || 'none'}`)
  return found[0]
}

// The operator's role, the leader-election role (when expected) and the
// webhook's Role (in webhookNamespace, the operator's own) and ClusterRole
// (when expected) hold exactly the required rules, each bound to the
// operator's service account, and there is no other Role or ClusterRole.
function checkRoles(objs, {operatorKind, operatorNamespace, leaderNamespace, webhook = true, webhookNamespace, names = NAMES,
  volcano = false, aggregated = true}) {
  const roles = objs.filter((o) => (o.kind === 'Role' || o.kind === 'ClusterRole') && !isAggregated(o))
  checkAggregated(objs, aggregated)
  const named = (o) => o.metadata.name.endsWith('-leader-election') || o.metadata.name.endsWith('-webhook')
  const operator = only(roles, (o) => o.kind === operatorKind && !named(o), `${operatorKind} for the operator`)
  assert.equal(operator.metadata.namespace, operatorNamespace, key(operator))
  const namespaced = operatorKind === 'Role'
  const want = split(requiredRules(ROOT, {gangScheduler: volcano ? 'volcano' : '', namespaced, webhook}), false)
  assert.deepEqual(roleRules(operator), want,
    `${key(operator)} differs from the operator's calls${volcano ? ' with --gang-scheduler=volcano' : ''}${namespaced ? ' with --namespace' : ''}`)
  const leader = roles.filter((o) => o.metadata.name.endsWith('-leader-election'))
  if (leaderNamespace) {
    assert.equal(leader.length, 1, 'one leader-election Role')
    assert.equal(leader[0].kind, 'Role')
    assert.equal(leader[0].metadata.namespace, leaderNamespace)
    assert.deepEqual(roleRules(leader[0]), LEADER_RULES, `${key(leader[0])} differs from the leader elector's calls`)
  } else {
    assert.equal(leader.length, 0, 'no leader-election Role without leader election')
  }
  const webhookRoles = roles.filter((o) => o.metadata.name.endsWith('-webhook'))
  if (webhookNamespace) {
    assert.deepEqual(webhookRoles.map((o) => o.kind).sort(), ['ClusterRole', 'Role'], 'a webhook Role and ClusterRole')
    const role = webhookRoles.find((o) => o.kind === 'Role')
    assert.equal(role.metadata.namespace, webhookNamespace, `${key(role)}: not in the operator's own namespace`)
    const rules = requiredNamedRules(ROOT, {names})
    assert.deepEqual(roleRules(role), rules.namespaced, `${key(role)} differs from webhook_certs.cc's calls`)
    const cluster = webhookRoles.find((o) => o.kind === 'ClusterRole')
    assert.deepEqual(roleRules(cluster), rules.cluster, `${key(cluster)} differs from webhook_certs.cc's calls`)
  } else {
    assert.equal(webhookRoles.length, 0, 'no webhook roles')
  }
  // Each role bound, by a binding of its own kind and name, to the operator.
  const sa = objs.find((o) => o.kind === 'Deployment').spec.template.spec.serviceAccountName
  for (const r of roles) {
    const binding = only(objs, (o) => o.kind === `${r.kind}Binding` && o.metadata.name === r.metadata.name &&
      o.metadata.namespace === r.metadata.namespace, `binding of ${key(r)}`)
    assert.deepEqual(binding.roleRef, {apiGroup: 'rbac.authorization.k8s.io', kind: r.kind, name: r.metadata.name})
    assert.deepEqual(binding.subjects.map((s) => [s.kind, s.name]), [['ServiceAccount', sa]], key(binding))
  }
  assert.equal(roles.length, 1 + leader.length + webhookRoles.length, `unexpected roles: ${roles.map(key).join(', ')}`)
}

// The aggregated ClusterRoles: edit (and admin) may create and change
// TrainingJobs, view may read them; nothing else, no other resource.
function checkAggregated(objs, expected) {
  const agg = objs.filter(isAggregated)
  if (!expected) {
    assert.deepEqual(agg.map(key), [], 'no aggregated ClusterRoles expected')
    return
  }
  assert.equal(agg.length, 2, `aggregated roles: ${agg.map(key).join(', ')}`)
  for (const o of agg) assert.equal(o.kind, 'ClusterRole', key(o))
  const edit = only(agg, (o) => o.metadata.labels['rbac.authorization.k8s.io/aggregate-to-edit'] === 'true', 'edit role')
  assert.equal(edit.metadata.labels['rbac.authorization.k8s.io/aggregate-to-admin'], 'true')
  assert.deepEqual(roleRules(edit), {
    'kubetrain.io/trainingjobs': ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'],
    'kubetrain.io/trainingjobs/status': ['get', 'list', 'watch'],
  })
  const view = only(agg, (o) => o.metadata.labels['rbac.authorization.k8s.io/aggregate-to-view'] === 'true', 'view role')
  assert.equal(view.metadata.labels['rbac.authorization.k8s.io/aggregate-to-edit'], undefined, 'view is not edit')
  assert.deepEqual(roleRules(view), {
    'kubetrain.io/trainingjobs': ['get', 'list', 'watch'], 'kubetrain.io/trainingjobs/status': ['get', 'list', 'watch'],
  })
}

test('Secrets: the controller only creates them; only the webhook reads and updates one, its own, by name', () => {
  // The job's token Secrets, in every watched namespace: create only, never read.
  assert.deepEqual(required['/secrets'], ['create'])
  const {uses} = deriveOperatorRules(ROOT)
  const secrets = uses.filter((u) => u.rule === '/secrets')
  assert.ok(!secrets.some((u) => ['list', 'watch'].includes(u.verb)), 'no Secret informer or list')
  for (const u of secrets.filter((x) => x.verb !== 'create')) {
    assert.ok(NAMED[u.file]?.rules['/secrets'], `${u.where}: ${u.verb} on Secrets outside NAMED`)
  }
  // The webhook's certificate Secret, in the operator's own namespace.
  assert.deepEqual(WEBHOOK_RULES.namespaced, {'/secrets': ['create'], '/secrets:kubetrain-webhook-cert': ['get', 'update']})
  assert.deepEqual(WEBHOOK_RULES.cluster,
    {'admissionregistration.k8s.io/validatingwebhookconfigurations:kubetrain-validating-webhook': ['get', 'update']})
  // Neither without the webhook, nor with a certificate from elsewhere.
  for (const off of [{webhook: false}, {webhookCertSecret: 'tls'}]) {
    assert.deepEqual(requiredNamedRules(ROOT, {names: NAMES, ...off}), {namespaced: {}, cluster: {}}, JSON.stringify(off))
  }
})

test('the webhook\'s certificate calls are reached only with the webhook on and no --webhook-cert-dir', () => {
  const {uses} = deriveOperatorRules(ROOT)
  // A call of `fn`, or a construction (`make_unique<...::Fn>(`) of a class.
  const calls = (text, fn) => new RegExp(`\\b${fn}\\s*>?\\s*\\(`).test(text)
  for (const [file, n] of Object.entries(NAMED)) {
    assert.ok(uses.some((u) => u.file === file), `${file}: no call found; drop it from NAMED`)
    for (const u of uses.filter((x) => x.file === file)) {
      assert.ok(n.rules[u.rule], `${u.where}: ${u.rule} is not in NAMED['${file}'].rules`)
    }
    // Its functions are called only from the callers, which hold the guards.
    for (const f of listFiles(join(ROOT, 'operator')).filter((p) => p.endsWith('.cc') && !p.endsWith(file))) {
      const rel = f.slice(ROOT.length + 1)
      const text = stripComments(readFileSync(f, 'utf8'))
      for (const fn of n.functions) {
        if (calls(text, fn)) assert.ok(rel in n.callers, `${rel} calls ${fn}, outside ${Object.keys(n.callers)}`)
      }
    }
    for (const [caller, {guards, calls: made}] of Object.entries(n.callers)) {
      const text = stripComments(readFileSync(join(ROOT, caller), 'utf8'))
      for (const g of guards) assert.ok(text.includes(g), `${caller} lost its guard ${g}`)
      for (const fn of made) assert.ok(calls(text, fn), `${caller} no longer calls ${fn}`)
    }
  }
})

test('Nodes: list and watch only, and only for a cluster-wide install', () => {
  assert.deepEqual(required['/nodes'], ['list', 'watch'])
  for (const v of required['/nodes']) assert.ok(['get', 'list', 'watch'].includes(v), `nodes: ${v}`)
  assert.ok(!('/nodes' in requiredRules(ROOT, {namespaced: true})))
})

test('PodGroups are used only behind --gang-scheduler=volcano, Nodes behind --watch-nodes, get on TrainingJobs behind the webhook', () => {
  const {uses} = deriveOperatorRules(ROOT)
  for (const [rule, c] of Object.entries(CONDITIONAL)) {
    const found = uses.filter((u) => u.rule === rule && (!c.verbs || c.verbs.includes(u.verb)))
    assert.ok(found.length > 0, `${rule}: no call found; drop it from CONDITIONAL`)
    for (const u of found) {
      const file = u.where.split(':')[0]
      assert.ok(c.files.includes(file), `${rule} used in ${u.where}, outside ${c.files.join(', ')}`)
    }
    for (const [i, f] of c.files.entries()) {
      assert.ok(readFileSync(join(ROOT, f), 'utf8').includes(c.guards[i]), `${f} lost its guard ${c.guards[i]}`)
    }
    const verbs = c.verbs ?? found.map((u) => u.verb)
    const granted = (opts) => verbs.every((v) => requiredRules(ROOT, opts)[rule]?.includes(v))
    const denied = (opts) => verbs.every((v) => !requiredRules(ROOT, opts)[rule]?.includes(v))
    if ('operator.gangScheduler' in c.when) {
      assert.ok(denied({}), `${rule} granted without ${c.flag}`)
      assert.ok(granted({gangScheduler: 'volcano'}))
    } else if ('watchNamespace' in c.when) {
      assert.ok(granted({}), `${rule} not granted cluster-wide`)
      assert.ok(denied({namespaced: true}), `${rule} granted to a namespaced install`)
    } else {
      assert.ok(granted({}) && granted({namespaced: true}), `${rule} ${verbs} not granted with the webhook`)
      assert.ok(denied({webhook: false}), `${rule} ${verbs} granted without the webhook`)
    }
  }
})

test('the scanner finds calls across lines, without kube::, and MergePatch on status', () => {
  const src = `
namespace kubetrain::kube {
  auto a = d.client->Create(
      kube::kPods, ns, BuildPod(job, "x(", type, i));
  auto b = client_.Get(kLeases, ns, name);  // client_.Delete(kPods, ...) in a comment
  /* client_.Watch(kSecrets, ns, {}) */
  auto c = d.client->Delete(kube::kTrainingJobs, ns, name, options);
  auto e = client_.MergePatch(kube::kTrainingJobs, kube::Namespace(j),
                              kube::Name(j), patch, "status");
  auto f = client_.MergePatch(kPods, ns, name, Json{{"a", 1}});
  auto g = deps_.client->UpdateStatus(
      kube::kTrainingJobs, object);
  m.jobs = std::make_unique<kube::Informer>(m.client, kube::kServices, opts, m.logger);
  kube::Informer inf(client,
                     kube::kPodGroups, opts);
  cache_.List();
  informer.AddHandlers(kube::InformerHandlers{[](const kube::ObjectPtr& o) {}});
}`
  const {calls, unresolved} = scanSource(src)
  assert.deepEqual(unresolved, [])
  assert.deepEqual(calls.map((c) => [c.constant, c.verb, c.subresource, c.line]), [
    ['kPods', 'create', '', 3], ['kLeases', 'get', '', 5], ['kTrainingJobs', 'delete', '', 7],
    ['kTrainingJobs', 'patch', 'status', 8], ['kPods', 'patch', '', 10], ['kTrainingJobs', 'update', 'status', 11],
    ['kServices', 'informer', '', 13], ['kPodGroups', 'informer', '', 14]])
  // A client call whose resource the scanner cannot name is reported.
  const bad = scanSource('auto x = d.client->Delete(type, ns, name);\nclient_.MergePatch(kPods, ns, n, p, sub);')
  assert.equal(bad.unresolved.length, 2)
})

test("the operator's calls, derived from operator/**/*.cc", () => {
  const {rules, uses, informerVerbs} = deriveOperatorRules(ROOT)
  assert.deepEqual(informerVerbs, ['list', 'watch'])
  const width = Math.max(...Object.keys(required).map((k) => k.length))
  for (const [k, verbs] of Object.entries(required).sort()) {
    const why = verbs.map((v) => `${v}: ${uses.filter((u) => u.rule === k && u.verb === v).map((u) => u.where)[0] ??
      'EXCEPTION (see operator_rbac.mjs)'}`)
    console.log(`${k.padEnd(width)}  ${why.join('; ')}`)
  }
  // Sanity: the calls the controller cannot work without were found.
  for (const [k, v] of [['kubetrain.io/trainingjobs', 'watch'], ['/pods', 'create'], ['kubetrain.io/trainingjobs/status', 'update']]) {
    assert.ok(rules[k]?.includes(v), `${k} ${v} not found in the source: is the scanner broken?`)
  }
  // An exception is only for what no call shows.
  for (const [k, verbs] of Object.entries(EXCEPTIONS)) {
    for (const v of verbs) assert.ok(!rules[k]?.includes(v), `${k} ${v} is now called: drop it from EXCEPTIONS`)
  }
})

test('helm: ClusterRole and leader-election Role are exactly the operator\'s calls', () => {
  const helm = requireTool('helm')
  const VALUES = join(ROOT, 'tests/packaging/values')
  const own = 'kubetrain-system'
  checkRoles(helmTemplate(helm), {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: own, webhookNamespace: own})
  checkRoles(helmTemplate(helm, {values: join(VALUES, 'namespaced.yaml')}),
    {operatorKind: 'Role', operatorNamespace: 'kubetrain-jobs', leaderNamespace: own, webhookNamespace: own, aggregated: false})
  checkRoles(helmTemplate(helm, {values: join(VALUES, 'no-leader-election.yaml')}),
    {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: undefined, webhookNamespace: own})
  // The webhook's Secret with the Lease, in kube-system.
  checkRoles(helmTemplate(helm, {values: join(VALUES, 'everything.yaml')}),
    {operatorKind: 'Role', operatorNamespace: 'research', leaderNamespace: 'kube-system', webhookNamespace: 'kube-system',
      names: {'--webhook-secret-name': 'trainer-webhook-cert', '--webhook-config-name': 'trainer-validating-webhook'},
      volcano: true, aggregated: false})
  checkRoles(helmTemplate(helm, {values: join(VALUES, 'volcano.yaml')}),
    {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: own, webhookNamespace: own, volcano: true})
  checkRoles(helmTemplate(helm, {set: ['rbac.aggregateToDefaultRoles=false']}),
    {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: own, webhookNamespace: own, aggregated: false})
  // A mounted certificate: the webhook reads TrainingJobs, but keeps no
  // Secret and no caBundle; without the webhook not even that.
  checkRoles(helmTemplate(helm, {values: join(VALUES, 'cert-manager.yaml')}),
    {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: own})
  checkRoles(helmTemplate(helm, {values: join(VALUES, 'no-webhook.yaml')}),
    {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: own, webhook: false})
})

test('kustomize: deploy/base and deploy/overlays/namespaced grant exactly the operator\'s calls', () => {
  const kubectl = requireTool('kubectl')
  const build = (dir) => loadYamlDocuments(run(kubectl, ['kustomize', join(ROOT, dir)]), dir)
  const own = 'kubetrain-system'
  checkRoles(build('deploy/base'), {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: own, webhookNamespace: own})
  checkRoles(build('deploy/overlays/namespaced'),
    {operatorKind: 'Role', operatorNamespace: 'kubetrain-jobs', leaderNamespace: own, webhookNamespace: own, aggregated: false})
  checkRoles(build('deploy/overlays/monitoring'), {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: own, webhookNamespace: own})
})
