// The TrainingJob CRD: its shape, that it matches the fields the operator
// reads (api/training_job.cc), that every example passes its schema
// and CEL rules, that every job in invalid-jobs/ is refused naming the field,
// that the immutability transition rule holds, and that the status schema holds
// exactly the fields the operator writes (operator/controller/*.cc).
import {test} from 'node:test'
import assert from 'node:assert/strict'
import {readFileSync, readdirSync} from 'node:fs'
import {join} from 'node:path'
import {CrdValidator, loadYamlFile} from '../../tools/node/lib/crd.mjs'

const ROOT = new URL('../..', import.meta.url).pathname
const CRD_PATH = join(ROOT, 'crds/kubetrain.io_trainingjobs.yaml')
const crd = loadYamlFile(CRD_PATH)[0]
const validator = new CrdValidator(crd)
const version = crd.spec.versions[0]
const schema = version.schema.openAPIV3Schema

function yamlFiles(dir) {
  return readdirSync(dir).filter((f) => /\.(ya?ml|json)$/.test(f)).sort().map((f) => join(dir, f))
}

test('names, scope, subresource and printer columns', () => {
  assert.equal(crd.metadata.name, 'trainingjobs.kubetrain.io')
  assert.equal(crd.spec.group, 'kubetrain.io')
  assert.equal(crd.spec.scope, 'Namespaced')
  assert.deepEqual(crd.spec.names, {
    kind: 'TrainingJob', listKind: 'TrainingJobList', plural: 'trainingjobs',
    singular: 'trainingjob', shortNames: ['tj'], categories: ['all'],
  })
  assert.equal(crd.spec.versions.length, 1)
  assert.equal(version.name, 'v1alpha1')
  assert.ok(version.served && version.storage)
  assert.deepEqual(version.subresources, {
    status: {},
    scale: {
      specReplicasPath: '.spec.replicaSpecs.Worker.replicas',
      statusReplicasPath: '.status.replicaStatuses.Worker.active',
      labelSelectorPath: '.status.replicaStatuses.Worker.selector',
    },
  })
  const cols = Object.fromEntries(version.additionalPrinterColumns.map((c) => [c.name, [c.type, c.jsonPath]]))
  assert.deepEqual(cols, {
    Status: ['string', '.status.conditions[-1:].type'],
    Step: ['integer', '.status.progress.step'],
    Loss: ['number', '.status.progress.loss'],
    Accuracy: ['number', '.status.progress.accuracy'],
    World: ['integer', '.status.worldSize'],
    Generation: ['integer', '.status.generation'],
    Age: ['date', '.metadata.creationTimestamp'],
  })
})

// Structural schema rules the API server enforces at CRD creation that a test
// can check without one: every node has a type (or preserves unknown fields),
// properties and additionalProperties never together, defaults inside enums
// and bounds, every CEL rule has a message.
test('the schema is structural', () => {
  const problems = []
  const walk = (s, path) => {
    if (!s.type && !s['x-kubernetes-preserve-unknown-fields'] && !s['x-kubernetes-int-or-string']) problems.push(`${path}: no type`)
    if (s.properties && typeof s.additionalProperties === 'object') problems.push(`${path}: properties and additionalProperties`)
    if ('default' in s && s.enum && !s.enum.includes(s.default)) problems.push(`${path}: default not in enum`)
    if ('default' in s && 'minimum' in s && s.default < s.minimum) problems.push(`${path}: default below minimum`)
    for (const r of s['x-kubernetes-validations'] || []) if (!r.message) problems.push(`${path}: CEL rule without message`)
    for (const [k, sub] of Object.entries(s.properties || {})) walk(sub, `${path}.${k}`)
    if (typeof s.additionalProperties === 'object') walk(s.additionalProperties, `${path}.*`)
    if (s.items) walk(s.items, `${path}[]`)
  }
  walk(schema, '')
  assert.deepEqual(problems, [])
})

// Property names the schema declares under spec (typed fields only; the
// unknown fields a pod template keeps are not listed).
function schemaKeys(s, out = new Set()) {
  for (const [k, sub] of Object.entries(s.properties || {})) {
    out.add(k)
    schemaKeys(sub, out)
  }
  if (typeof s.additionalProperties === 'object') schemaKeys(s.additionalProperties, out)
  if (s.items) schemaKeys(s.items, out)
  return out
}

// Keys the TrainingJob decoder (api/training_job*.cc) reads: the literal in
// every Get*(obj, "key", ...), find("key") and CheckKnownFields list.
function operatorKeys() {
  const src = readdirSync(join(ROOT, 'api')).filter((f) => /^training_job.*\.cc$/.test(f))
    .map((f) => readFileSync(join(ROOT, 'api', f), 'utf8')).join('\n')
  const keys = new Set()
  for (const m of src.matchAll(/\bGet(?:String|Bool|OptionalInt|StringMap|StringList|Enum<\w+>)\(\s*[\w*]+,\s*"(\w+)"/g)) keys.add(m[1])
  for (const m of src.matchAll(/(?:\.|->)find\("(\w+)"\)/g)) keys.add(m[1])
  for (const m of src.matchAll(/CheckKnownFields\([^{]*\{([^}]*)\}/g)) {
    for (const k of m[1].matchAll(/"(\w+)"/g)) keys.add(k[1])
  }
  return keys
}

test('the schema declares exactly the fields the operator reads', () => {
  const op = operatorKeys()
  assert.ok(op.size > 20, `found only ${op.size} keys in api/training_job*.cc: has its style changed?`)
  // ObjectMeta is the API server's, not the CRD schema's.
  const objectMeta = new Set(['name', 'namespace', 'labels', 'annotations', 'uid', 'resourceVersion', 'generation'])
  const statusKeys = schemaKeys(schema.properties.status)
  const specKeys = schemaKeys(schema.properties.spec)
  const declared = new Set([...specKeys, 'apiVersion', 'kind', 'metadata', 'spec', 'status', ...objectMeta])
  const missing = [...op].filter((k) => !declared.has(k))
  const unread = [...specKeys].filter((k) => !op.has(k))
  assert.deepEqual(missing, [], 'fields the operator reads but the CRD does not declare')
  assert.deepEqual(unread, [], 'fields the CRD declares under spec but the operator never reads')
})

// Keys the typed status (api/job_status.cc) reads and writes: the literal in
// every Get*(obj, "key", ...), find("key"), {"key", ...} and out["key"].
function statusCodeKeys() {
  const src = readFileSync(join(ROOT, 'api/job_status.cc'), 'utf8')
  const keys = new Set()
  for (const re of [/\bGet\w*(?:<\w+>)?\(\s*\w+,\s*"(\w+)"/g, /(?:\.|->)find\("(\w+)"\)/g,
    /\{"(\w+)",/g, /\bout\["(\w+)"\]/g]) {
    for (const m of src.matchAll(re)) keys.add(m[1])
  }
  return keys
}

test('the status schema declares exactly the fields api/job_status.cc reads and writes', () => {
  const code = statusCodeKeys()
  assert.ok(code.size > 20, `found only ${code.size} keys in api/job_status.cc: has its style changed?`)
  const declared = schemaKeys(schema.properties.status)
  assert.deepEqual([...code].filter((k) => !declared.has(k)), [], 'status fields the operator uses but the CRD does not declare')
  assert.deepEqual([...declared].filter((k) => !code.has(k)), [], 'status fields the CRD declares but api/job_status.cc does not know')
  const h = readFileSync(join(ROOT, 'api/job_status.h'), 'utf8')
  const conditionTypes = [...h.matchAll(/inline constexpr char kCond\w+\[\] = "(\w+)";/g)].map((m) => m[1])
  assert.deepEqual(schema.properties.status.properties.conditions.items.properties.type.enum, conditionTypes)
})

test('defaults and enums agree with api/training_job.h', () => {
  const h = readFileSync(join(ROOT, 'api/training_job.h'), 'utf8')
  const rs = schema.properties.spec.properties.replicaSpecs.additionalProperties.properties
  const rp = schema.properties.spec.properties.runPolicy.properties
  assert.equal(rs.replicas.default, 1)
  assert.match(h, /std::optional<int32_t> replicas;\s*\/\/ default 1/)
  const restart = h.match(/kDefaultRestartPolicy = RestartPolicy::k(\w+);/)[1]
  assert.equal(rs.restartPolicy.default, restart)
  assert.deepEqual(rs.restartPolicy.enum, [...h.match(/enum class RestartPolicy \{([^}]*)\}/)[1].matchAll(/k(\w+)/g)].map((m) => m[1]))
  assert.deepEqual(rp.cleanPodPolicy.enum, [...h.match(/enum class CleanPodPolicy \{([^}]*)\}/)[1].matchAll(/k(\w+)/g)].map((m) => m[1]))
  assert.equal(rp.cleanPodPolicy.default, 'Running')
  assert.match(h, /clean_pod_policy;\s*\/\/ default Running/)
  assert.deepEqual(schema.properties.spec.properties.successPolicy.enum, ['', 'AllWorkers'])
  const modes = [...h.match(/enum class ServiceMode \{([^}]*)\}/)[1].matchAll(/k(\w+)/g)].map((m) => m[1])
  assert.deepEqual(schema.properties.spec.properties.serviceMode.enum, modes)
  assert.equal(schema.properties.spec.properties.serviceMode.default, 'PerReplica')
  assert.match(h, /ServiceMode service_mode = ServiceMode::kPerReplica;/)
  const replicaTypes = readFileSync(join(ROOT, 'api/replica_type.h'), 'utf8')
  const types = [...replicaTypes.match(/enum class ReplicaType \{([^}]*)\}/)[1].matchAll(/k(\w+)/g)].map((m) => m[1])
  const keysRule = schema.properties.spec.properties.replicaSpecs['x-kubernetes-validations'][0].rule
  assert.deepEqual([...keysRule.matchAll(/'(\w+)'/g)].map((m) => m[1]), types)
})

const EXAMPLES = yamlFiles(join(ROOT, 'examples'))

test('every example passes the schema and the CEL rules', () => {
  assert.ok(EXAMPLES.length >= 6, `only ${EXAMPLES.length} examples`)
  for (const file of EXAMPLES) {
    for (const doc of loadYamlFile(file)) {
      if (doc.kind !== 'TrainingJob') continue
      const {errors, object} = validator.validate(doc)
      assert.deepEqual(errors, [], file)
      // Defaults as the API server stores them.
      for (const r of Object.values(object.spec.replicaSpecs)) {
        assert.ok(Number.isInteger(r.replicas) && typeof r.restartPolicy === 'string', file)
      }
      assert.equal(typeof object.spec.runPolicy?.cleanPodPolicy, 'string', file)
    }
  }
})

test('defaults are applied as the operator applies them', () => {
  const {errors, object} = validator.validate({
    apiVersion: 'kubetrain.io/v1alpha1', kind: 'TrainingJob', metadata: {name: 'mini'},
    spec: {replicaSpecs: {Worker: {template: {spec: {containers: [{name: 'c', image: 'i'}]}}}}, runPolicy: {}},
  })
  assert.deepEqual(errors, [])
  assert.equal(object.spec.replicaSpecs.Worker.replicas, 1)
  assert.equal(object.spec.replicaSpecs.Worker.restartPolicy, 'Never')
  assert.equal(object.spec.runPolicy.cleanPodPolicy, 'Running')
})

const INVALID = yamlFiles(join(ROOT, 'tests/packaging/invalid-jobs'))

test('every invalid job is refused with a message naming the field', () => {
  assert.ok(INVALID.length >= 12, `only ${INVALID.length} invalid jobs`)
  for (const file of INVALID) {
    const text = readFileSync(file, 'utf8')
    const expect = text.match(/^# expect: (.+)$/m)
    assert.ok(expect, `${file}: no "# expect:" line`)
    const [doc] = loadYamlFile(file)
    const {errors} = validator.validate(doc)
    assert.ok(errors.length > 0, `${file}: accepted`)
    assert.ok(errors.some((e) => e.includes(expect[1])), `${file}: no error names "${expect[1]}": ${JSON.stringify(errors)}`)
    console.log(`${file.slice(ROOT.length)}: ${errors[0]}`)
  }
})

test('replicaSpecs are immutable while Running, except Worker replicas', () => {
  const [job] = loadYamlFile(join(ROOT, 'examples/fmnist-ps-sync.yaml'))
  const running = structuredClone(job)
  running.status = {conditions: [{type: 'Created', status: 'True'}, {type: 'Running', status: 'True'}]}
  const update = (change, old = running) => {
    const next = structuredClone(old)
    change(next)
    return validator.validate(next, old).errors
  }
  assert.deepEqual(update((j) => { j.spec.replicaSpecs.Worker.replicas = 4 }), [])
  assert.deepEqual(update((j) => { j.spec.runPolicy.backoffLimit = 5 }), [])
  const immutable = [
    (j) => { j.spec.replicaSpecs.PS.replicas = 2 },
    (j) => { j.spec.replicaSpecs.Worker.restartPolicy = 'Never' },
    (j) => { j.spec.replicaSpecs.Worker.template.spec.containers[0].image = 'kubetrain:v2' },
    (j) => { j.spec.replicaSpecs.PS.template.spec.containers[0].args.push('--lr=0.1') },
    (j) => { delete j.spec.replicaSpecs.PS },
    (j) => { j.spec.replicaSpecs.Evaluator = structuredClone(j.spec.replicaSpecs.PS) },
  ]
  for (const change of immutable) {
    const errors = update(change)
    assert.ok(errors.some((e) => e.includes('spec.replicaSpecs: immutable while the job is Running')), JSON.stringify(errors))
  }
  // Before it runs, and after it finished, anything goes.
  const created = structuredClone(job)
  created.status = {conditions: [{type: 'Created', status: 'True'}]}
  assert.deepEqual(update((j) => { j.spec.replicaSpecs.PS.replicas = 2 }, created), [])
  const done = structuredClone(job)
  done.status = {conditions: [{type: 'Running', status: 'False'}, {type: 'Succeeded', status: 'True'}]}
  assert.deepEqual(update((j) => { j.spec.replicaSpecs.PS.replicas = 2 }, done), [])
})

// The status fields the operator writes, as schema paths ("status.progress.step",
// "status.replicaStatuses.*.restarts", "status.conditions[].reason"), read from
// the files that write them: every `var["key"] = ...`, `Json& x = var["key"]`
// and `var = {{"key", ...}, ...}` / `Json var{{"key", ...}}` (nested lists
// too), with each variable mapped to where it sits in the status. A variable
// not in the map fails the test: say where it writes.
const STATUS_WRITERS = {
  'api/job_status.cc': {
    out: 'status', condition: 'status.conditions[]', replica: 'status.replicaStatuses.*',
    failure: 'status.lastFailure', progress: 'status.progress',
    checkpoint: 'status.lastCheckpoint',
  },
  'operator/controller/reconciler.cc': {object: ''},
  'operator/controller/progress_poller.cc': {progress: 'status.progress', patch: '', desired: 'status'},
}

// The keys of a brace-init list `{{"k", v}, {"k2", {{"n", w}}}}` starting at
// text[open] === '{', as paths relative to it.
function initListKeys(text, open) {
  const keys = []
  let depth = 0
  for (let i = open; i < text.length; i++) {
    const c = text[i]
    if (c === '"') {
      let j = i + 1
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1
      // A key: the first element of a pair, right after the pair's '{'.
      const pairOpen = /\{\s*$/.test(text.slice(open, i)) && depth >= 2 && (depth % 2 === 0)
      if (pairOpen && /^\s*,/.test(text.slice(j + 1))) {
        const name = text.slice(i + 1, j)
        // Nested list as the value: {{"k", {{...}}}}
        const rest = text.slice(j + 1).match(/^\s*,\s*\{\{/)
        if (rest) {
          const nestedOpen = j + 1 + rest[0].length - 2
          keys.push(name, ...initListKeys(text, nestedOpen).map((k) => `${name}.${k}`))
          // skip the nested list
          let d = 0
          let k = nestedOpen
          for (; k < text.length; k++) {
            if (text[k] === '{') d++
            else if (text[k] === '}' && --d === 0) break
          }
          i = k
          continue
        }
        keys.push(name)
      }
      i = j
    } else if (c === '{') {
      depth++
    } else if (c === '}') {
      if (--depth === 0) return keys
    }
  }
  throw new Error('unbalanced brace-init list')
}

function statusWrites() {
  const paths = new Set()
  const problems = []
  for (const [file, vars] of Object.entries(STATUS_WRITERS)) {
    const text = readFileSync(join(ROOT, file), 'utf8').replace(/\/\/[^\n]*/g, '')
    const found = []
    for (const m of text.matchAll(/([\w.]+)\["(\w+)"\]\s*=(?!=)/g)) found.push([m[1], m[2], m.index])
    // A non-const reference: operator[] creates the key.
    for (const m of text.matchAll(/(\bconst\s+)?[\w:]+\s*&\s*\w+\s*=\s*([\w.]+)\["(\w+)"\]/g)) {
      if (!m[1]) found.push([m[2], m[3], m.index])
    }
    for (const m of text.matchAll(/([\w.]+)\s*(?:=\s*)?(?=\{\{")/g)) {
      const open = m.index + m[0].length
      for (const k of initListKeys(text, open)) found.push([m[1], k, m.index])
    }
    for (const [v, k, at] of found) {
      if (!(v in vars)) {
        problems.push(`${file}:${text.slice(0, at).split('\n').length}: writes "${k}" into ${v}: add ${v} to STATUS_WRITERS`)
        continue
      }
      const path = [vars[v], k].filter(Boolean).join('.')
      if (path.startsWith('status.')) paths.add(path)
    }
  }
  assert.deepEqual(problems, [])
  return paths
}

// Every path in a schema (or a value) the same way: "a.b", "a.*.c", "a[].d".
function schemaPaths(s, prefix, out = new Set()) {
  for (const [k, sub] of Object.entries(s.properties || {})) {
    out.add(`${prefix}.${k}`)
    schemaPaths(sub, `${prefix}.${k}`, out)
  }
  if (typeof s.additionalProperties === 'object') schemaPaths(s.additionalProperties, `${prefix}.*`, out)
  if (s.items) schemaPaths(s.items, `${prefix}[]`, out)
  return out
}
function valuePaths(v, prefix, mapAt, out = new Set()) {
  if (Array.isArray(v)) {
    for (const e of v) valuePaths(e, `${prefix}[]`, mapAt, out)
  } else if (v && typeof v === 'object') {
    for (const [k, sub] of Object.entries(v)) {
      const p = mapAt.includes(prefix) ? `${prefix}.*` : `${prefix}.${k}`
      out.add(p)
      valuePaths(sub, p, mapAt, out)
    }
  }
  return out
}

const STATUS_FIXTURE = join(ROOT, 'tests/packaging/operator-status.json')

test('the status schema holds exactly the fields the operator writes', () => {
  const written = statusWrites()
  assert.ok(written.size > 20, `found only ${written.size} status writes: has the code's style changed?`)
  console.log(`status fields the operator writes: ${[...written].sort().join(' ')}`)
  const declared = schemaPaths(schema.properties.status, 'status')
  const mapAt = ['status.replicaStatuses']
  assert.deepEqual([...written].filter((p) => !declared.has(p)).sort(), [],
    'the operator writes these status fields but the CRD does not declare them (the API server would prune them)')
  assert.deepEqual([...declared].filter((p) => !written.has(p) && !mapAt.some((m) => p === `${m}.*`)).sort(), [],
    'the CRD declares these status fields but the operator never writes them')
  // The fixture holds every field the operator writes (and nothing else).
  const status = JSON.parse(readFileSync(STATUS_FIXTURE, 'utf8'))
  const inFixture = valuePaths(status, 'status', mapAt)
  assert.deepEqual([...written].filter((p) => !inFixture.has(p)).sort(), [], `missing from ${STATUS_FIXTURE}`)
  assert.deepEqual([...inFixture].filter((p) => !written.has(p) && !mapAt.some((m) => p === `${m}.*`)).sort(), [],
    `${STATUS_FIXTURE} holds fields the operator does not write`)
})

test('status written by the operator validates', () => {
  const [job] = loadYamlFile(join(ROOT, 'examples/fmnist-ps-sync.yaml'))
  job.status = JSON.parse(readFileSync(STATUS_FIXTURE, 'utf8'))
  assert.deepEqual(validator.validate(job).errors, [])
  const bad = (edit, path) => {
    const j = structuredClone(job)
    edit(j.status)
    assert.ok(validator.validate(j).errors.some((e) => e.startsWith(path)), `${path}: ${validator.validate(j).errors}`)
  }
  bad((s) => { s.progress.step = 'many' }, 'status.progress.step')
  bad((s) => { s.restartCount = 'one' }, 'status.restartCount')
  bad((s) => { s.replicaStatuses.Worker.restarts = 1.5 }, 'status.replicaStatuses.Worker.restarts')
  bad((s) => { s.progress.epoch = 3 }, 'status.progress')  // undeclared: pruned by a real API server
})

// restartPolicy ExitCode: `kubectl explain trainingjob.spec.replicaSpecs.Worker.restartPolicy`
// states the rule the operator applies (api/replica_policy.cc:
// IsRetryableExitCode, code >= 128) and how it differs from Kubeflow's
// documented list.
test('the restartPolicy description states the ExitCode rule and how it differs from Kubeflow', () => {
  const rs = version.schema.openAPIV3Schema.properties.spec.properties.replicaSpecs
  const policy = (rs.properties?.Worker ?? rs.additionalProperties).properties.restartPolicy
  const d = policy.description
  for (const s of ['1-127 fail the job', '128 and above', '129', "Kubeflow's documented", '139', '130, 137, 138', '143']) {
    assert.ok(d.includes(s), `restartPolicy description lacks "${s}": ${d}`)
  }
  const src = readFileSync(join(ROOT, 'api/replica_policy.cc'), 'utf8')
  assert.match(src, /bool IsRetryableExitCode\(int code\) \{ return code >= 128; \}/,
    'the operator changed its rule: update the CRD description')
})
