// RBAC from the code: the verbs kubetrain-operator's source really calls
// (operator_rbac.mjs reads operator/**/*.cc) are exactly what the chart's
// ClusterRole (or namespaced Role) and leader-election Role grant, and what
// deploy/base and deploy/overlays/namespaced grant: a missing verb fails as
// much as an unused one. The one permission no call shows is listed, with its
// reason, in operator_rbac.mjs's EXCEPTIONS.
import {test} from 'node:test'
import assert from 'node:assert/strict'
import {join} from 'node:path'
import {loadYamlDocuments} from '../../tools/node/lib/crd.mjs'
import {readFileSync} from 'node:fs'
import {CONDITIONAL, EXCEPTIONS, deriveOperatorRules, requiredRules, scanSource} from './operator_rbac.mjs'
import {ROOT, helmTemplate, key, requireTool, run} from './tools.mjs'

// Granted in the leader-election Role, in the lease's namespace; everything
// else in the ClusterRole, or the Role of the watched namespace.
const LEADER_ELECTION = ['coordination.k8s.io/leases']

const required = requiredRules(ROOT)
const split = (rules, leader) =>
  Object.fromEntries(Object.entries(rules).filter(([k]) => LEADER_ELECTION.includes(k) === leader))
const OPERATOR_RULES = split(required, false)
const LEADER_RULES = split(required, true)
const VOLCANO_RULES = split(requiredRules(ROOT, {gangScheduler: 'volcano'}), false)
// A namespaced install: no cluster-scoped resources (Nodes).
const NAMESPACED_RULES = split(requiredRules(ROOT, {namespaced: true}), false)
const NAMESPACED_VOLCANO_RULES = split(requiredRules(ROOT, {gangScheduler: 'volcano', namespaced: true}), false)

// The ClusterRoles aggregated into the built-in roles (not the operator's).
const AGGREGATE = /^rbac\.authorization\.k8s\.io\/aggregate-to-/
const isAggregated = (o) => Object.keys(o.metadata.labels ?? {}).some((l) => AGGREGATE.test(l))

// One Role or ClusterRole's rules as "group/resource" -> sorted verbs; each
// resource in one rule only, no verb twice, no wildcards or resourceNames.
function roleRules(role) {
  const out = {}
  for (const r of role.rules) {
    assert.ok(!r.resourceNames && !r.nonResourceURLs, `${key(role)}: unexpected rule ${JSON.stringify(r)}`)
    assert.equal(new Set(r.verbs).size, r.verbs.length, `${key(role)}: a verb twice in ${JSON.stringify(r)}`)
    for (const g of r.apiGroups) {
      for (const res of r.resources) {
        assert.ok(g !== '*' && res !== '*' && !r.verbs.includes('*'), `${key(role)}: wildcard in ${JSON.stringify(r)}`)
        const k = `${g}/${res}`
        assert.ok(!(k in out), `${key(role)}: ${k} in two rules`)
        out[k] = [...r.verbs].sort()
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

// The operator's role and the leader-election role (when expected) hold
// exactly the required rules, and there is no other Role or ClusterRole.
function checkRoles(objs, {operatorKind, operatorNamespace, leaderNamespace, volcano = false, aggregated = true}) {
  const roles = objs.filter((o) => (o.kind === 'Role' || o.kind === 'ClusterRole') && !isAggregated(o))
  checkAggregated(objs, aggregated)
  const operator = only(roles, (o) => o.kind === operatorKind && !o.metadata.name.endsWith('-leader-election'),
    `${operatorKind} for the operator`)
  assert.equal(operator.metadata.namespace, operatorNamespace, key(operator))
  const namespaced = operatorKind === 'Role'
  const want = namespaced ? (volcano ? NAMESPACED_VOLCANO_RULES : NAMESPACED_RULES) : (volcano ? VOLCANO_RULES : OPERATOR_RULES)
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
  assert.equal(roles.length, 1 + leader.length, `unexpected roles: ${roles.map(key).join(', ')}`)
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

test('Secrets: create only, and no Secret informer or read anywhere in the operator', () => {
  assert.deepEqual(required['/secrets'], ['create'])
  const {uses} = deriveOperatorRules(ROOT)
  assert.deepEqual([...new Set(uses.filter((u) => u.rule === '/secrets').map((u) => u.verb))], ['create'])
})

test('Nodes: list and watch only, and only for a cluster-wide install', () => {
  assert.deepEqual(required['/nodes'], ['list', 'watch'])
  for (const v of required['/nodes']) assert.ok(['get', 'list', 'watch'].includes(v), `nodes: ${v}`)
  assert.ok(!('/nodes' in requiredRules(ROOT, {namespaced: true})))
})

test('PodGroups are used only behind --gang-scheduler=volcano, Nodes behind --watch-nodes', () => {
  const {uses} = deriveOperatorRules(ROOT)
  for (const [rule, c] of Object.entries(CONDITIONAL)) {
    const found = uses.filter((u) => u.rule === rule)
    assert.ok(found.length > 0, `${rule}: no call found; drop it from CONDITIONAL`)
    for (const u of found) {
      const file = u.where.split(':')[0]
      assert.ok(c.files.includes(file), `${rule} used in ${u.where}, outside ${c.files.join(', ')}`)
    }
    for (const [i, f] of c.files.entries()) {
      assert.ok(readFileSync(join(ROOT, f), 'utf8').includes(c.guards[i]), `${f} lost its guard ${c.guards[i]}`)
    }
    if (c.value === 'operator.gangScheduler') {
      assert.ok(!(rule in required), `${rule} granted without ${c.flag}`)
      assert.ok(rule in requiredRules(ROOT, {gangScheduler: 'volcano'}))
    } else {
      assert.ok(rule in required, `${rule} not granted cluster-wide`)
      assert.ok(!(rule in requiredRules(ROOT, {namespaced: true})), `${rule} granted to a namespaced install`)
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
  checkRoles(helmTemplate(helm), {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: 'kubetrain-system'})
  checkRoles(helmTemplate(helm, {values: join(VALUES, 'namespaced.yaml')}),
    {operatorKind: 'Role', operatorNamespace: 'kubetrain-jobs', leaderNamespace: 'kubetrain-system', aggregated: false})
  checkRoles(helmTemplate(helm, {values: join(VALUES, 'no-leader-election.yaml')}),
    {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: undefined})
  checkRoles(helmTemplate(helm, {values: join(VALUES, 'everything.yaml')}),
    {operatorKind: 'Role', operatorNamespace: 'research', leaderNamespace: 'kube-system', volcano: true, aggregated: false})
  checkRoles(helmTemplate(helm, {values: join(VALUES, 'volcano.yaml')}),
    {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: 'kubetrain-system', volcano: true})
  checkRoles(helmTemplate(helm, {set: ['rbac.aggregateToDefaultRoles=false']}),
    {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: 'kubetrain-system', aggregated: false})
})

test('kustomize: deploy/base and deploy/overlays/namespaced grant exactly the operator\'s calls', () => {
  const kubectl = requireTool('kubectl')
  const build = (dir) => loadYamlDocuments(run(kubectl, ['kustomize', join(ROOT, dir)]), dir)
  checkRoles(build('deploy/base'), {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: 'kubetrain-system'})
  checkRoles(build('deploy/overlays/namespaced'),
    {operatorKind: 'Role', operatorNamespace: 'kubetrain-jobs', leaderNamespace: 'kubetrain-system', aggregated: false})
  checkRoles(build('deploy/overlays/monitoring'), {operatorKind: 'ClusterRole', operatorNamespace: undefined, leaderNamespace: 'kubetrain-system'})
})
