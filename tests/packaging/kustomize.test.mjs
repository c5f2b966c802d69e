// deploy/: `kubectl kustomize` of the base and each overlay gives the same
// objects as `helm template` of the chart with the matching values (Namespace
// objects and helm's own labels aside).
import {test} from 'node:test'
import assert from 'node:assert/strict'
import {join} from 'node:path'
import {loadYamlDocuments} from '../../tools/node/lib/crd.mjs'
import {ROOT, helmTemplate, key, requireTool, run} from './tools.mjs'

const helm = requireTool('helm')
const kubectl = requireTool('kubectl')

const HELM_LABELS = ['helm.sh/chart', 'app.kubernetes.io/managed-by']
function normalise(o) {
  if (Array.isArray(o)) return o.map(normalise)
  if (o === null || typeof o !== 'object') return o
  const out = {}
  for (const [k, v] of Object.entries(o)) {
    if (k === 'labels' && v && typeof v === 'object') {
      out[k] = Object.fromEntries(Object.entries(v).filter(([l]) => !HELM_LABELS.includes(l)))
    } else {
      out[k] = normalise(v)
    }
  }
  return out
}

function byKey(objs) {
  const m = new Map()
  for (const o of objs) {
    if (o.kind === 'Namespace') continue  // helm leaves namespaces to --create-namespace
    assert.ok(!m.has(key(o)), `${key(o)} twice`)
    m.set(key(o), normalise(o))
  }
  return m
}

const CASES = [
  {dir: 'deploy/base', values: undefined, namespaces: ['kubetrain-system']},
  {dir: 'deploy/overlays/namespaced', values: 'namespaced.yaml', namespaces: ['kubetrain-jobs', 'kubetrain-system']},
  {dir: 'deploy/overlays/monitoring', values: 'monitoring.yaml', namespaces: ['kubetrain-system']},
]

// The admission webhook's objects, in the base and so in every overlay (the
// chart's with webhook.enabled, its default).
const WEBHOOK = ['Service/kubetrain-system/kubetrain-webhook', 'ValidatingWebhookConfiguration//kubetrain-validating-webhook',
  'Role/kubetrain-system/kubetrain-operator-webhook', 'RoleBinding/kubetrain-system/kubetrain-operator-webhook',
  'ClusterRole//kubetrain-operator-webhook', 'ClusterRoleBinding//kubetrain-operator-webhook']

for (const c of CASES) {
  test(`${c.dir} = helm template ${c.values ?? '(default values)'}`, () => {
    const kust = loadYamlDocuments(run(kubectl, ['kustomize', join(ROOT, c.dir)]), c.dir)
    assert.deepEqual(kust.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name).sort(), c.namespaces)
    for (const k of WEBHOOK) assert.ok(kust.some((o) => key(o) === k), `${c.dir}: no ${k}`)
    const fromKustomize = byKey(kust)
    const fromHelm = byKey(helmTemplate(helm, {
      values: c.values && join(ROOT, 'tests/packaging/values', c.values), crds: true,
    }))
    assert.deepEqual([...fromKustomize.keys()].sort(), [...fromHelm.keys()].sort())
    for (const [k, o] of fromHelm) assert.deepEqual(fromKustomize.get(k), o, k)
  })
}
