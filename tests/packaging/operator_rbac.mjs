// The Kubernetes API verbs kubetrain-operator really uses, read from its
// source (operator/**/*.cc), as RBAC rules: "group/plural[/subresource]" ->
// sorted verbs. The packaging tests compare these with the chart's and the
// kustomize base's Roles and ClusterRoles, both ways.
//
// How the operator reaches the API (operator/kube/kube_client.h): a
// kube::KubeClient method whose first argument is a resource constant of
// operator/kube/resource.h (kube::kPods, or kPods inside namespace kube):
//   Create -> create, Get -> get, List/ListAll -> list, Watch -> watch,
//   Update -> update, UpdateStatus -> update on <plural>/status,
//   MergePatch(type, ns, name, patch, "status") -> patch on <plural>/status
//   (without "status": patch), Delete -> delete;
// and kube::Informer(client, kube::kX, ...), which lists and watches X (the
// verbs are read from operator/kube/informer.cc's own calls on its type_).
// Calls may span lines. A client call whose resource is not a constant
// (outside kube_client.cc and informer.cc, which forward their argument) is
// an error: the permissions could not be derived.
import {readFileSync, readdirSync, statSync} from 'node:fs'
import {join, relative} from 'node:path'

const VERB = {
  Create: 'create', Get: 'get', List: 'list', ListAll: 'list', Watch: 'watch',
  Update: 'update', UpdateStatus: 'update', MergePatch: 'patch', Delete: 'delete',
}
const METHODS = Object.keys(VERB).sort((a, b) => b.length - a.length)
// Files that forward a ResourceType argument rather than naming one.
const FORWARDERS = ['operator/kube/kube_client.cc', 'operator/kube/informer.cc']

// Permissions no call shows. Each needs a reason.
export const EXCEPTIONS = {
  // Pods, Services, Secrets and PodGroups carry ownerReferences to their
  // TrainingJob with blockOwnerDeletion: true; with the
  // OwnerReferencesPermissionEnforcement admission plugin, creating them
  // needs update on the owner's finalizers subresource.
  'kubetrain.io/trainingjobs/finalizers': ['update'],
}

// Permissions the operator uses only with a flag, granted only with the
// chart values that set it: rule -> {when: {value: what it must be}, verbs
// (all when absent), flag, files, guards}. The test checks that every call
// of those verbs on the resource in the source sits in `files`, whose text
// contains the matching `guards` (the flag's check).
export const CONDITIONAL = {
  // PodGroups: the informer and every create/delete are behind
  // --gang-scheduler=volcano (training_job_controller.cc makes the informer
  // only then; reconciler.cc reaches them only through it).
  'scheduling.volcano.sh/podgroups': {
    when: {'operator.gangScheduler': 'volcano'}, flag: '--gang-scheduler=volcano',
    files: ['operator/controller/training_job_controller.cc', 'operator/controller/reconciler.cc'],
    guards: ['gang_scheduler == "volcano"', 'd.pod_groups'],
  },
  // Nodes: cluster-scoped, so only a cluster-wide install grants them; the
  // informer exists only with --watch-nodes (auto: off with --namespace).
  '/nodes': {
    when: {watchNamespace: ''}, flag: '--watch-nodes',
    files: ['operator/controller/training_job_controller.cc'],
    guards: ['options.watch_nodes'],
  },
  // get on TrainingJobs: only the admission webhook reads one (the job a
  // Scale belongs to: a Scale carries no elasticPolicy); the controller
  // reads its informer's cache. StartWebhook in main.cc returns before it
  // with --webhook-bind-address=0, which the chart passes with
  // webhook.enabled false.
  'kubetrain.io/trainingjobs': {
    when: {'webhook.enabled': true}, verbs: ['get'], flag: '--webhook-bind-address',
    files: ['operator/main.cc'],
    guards: ['if (!o.webhook_bind_address.enabled) {'],
  },
}

// Calls on single objects the operator names by a flag, in its own
// namespace or cluster-scoped, never on the watched namespaces' objects:
// file -> {rules: {rule: the flag naming the object}, when, functions,
// callers}. They are granted in roles of their own: a Role in the
// operator's own namespace for namespaced resources, a ClusterRole for
// cluster-scoped ones (also in a namespaced install), each verb limited to
// the object by resourceNames except create (RBAC sees no name before an
// object exists, so create cannot be limited by one). The file's
// `functions` may be called (or, for a class, constructed) only from
// `callers`, each holding its guards and making the calls it names.
export const NAMED = {
  // The admission webhook's self-managed certificate (webhook_certs.cc):
  // EnsureServingCert reads, updates or creates the --webhook-secret-name
  // Secret in the operator's own namespace (the leader-election namespace
  // resolution: --leader-election-namespace, else its service account's, as
  // the Lease's Role), and InjectCaBundle reads and updates the
  // --webhook-config-name ValidatingWebhookConfiguration (cluster-scoped).
  // main.cc calls them only with the webhook on and no --webhook-cert-dir:
  // a certificate from elsewhere (webhook.existingCertSecret) needs neither.
  'operator/webhook/webhook_certs.cc': {
    rules: {
      '/secrets': '--webhook-secret-name',
      'admissionregistration.k8s.io/validatingwebhookconfigurations': '--webhook-config-name',
    },
    when: {'webhook.enabled': true, 'webhook.existingCertSecret': ''},
    // main.cc makes the certificate and the CaBundleKeeper behind the guards;
    // the keeper (ca_bundle_keeper.cc) calls InjectCaBundle every 10 s.
    functions: ['EnsureServingCert', 'InjectCaBundle', 'CaBundleKeeper'],
    callers: {
      'operator/main.cc': {
        guards: ['if (!o.webhook_bind_address.enabled) {', 'if (!o.webhook_cert_dir.empty()) {'],
        calls: ['EnsureServingCert', 'CaBundleKeeper'],
      },
      'operator/webhook/ca_bundle_keeper.cc': {guards: [], calls: ['InjectCaBundle']},
    },
  },
}

// The chart values the permissions depend on, from requiredRules' options.
function chartValues({gangScheduler = '', namespaced = false, webhook = true, webhookCertSecret = ''} = {}) {
  return {
    'operator.gangScheduler': gangScheduler, watchNamespace: namespaced ? 'namespaced' : '',
    'webhook.enabled': webhook, 'webhook.existingCertSecret': webhookCertSecret,
  }
}
const holds = (when, values) => Object.entries(when).every(([k, v]) => values[k] === v)

// C++ source with comments blanked (newlines kept); string and character
// literals kept as they are.
export function stripComments(src) {
  let out = ''
  let i = 0
  while (i < src.length) {
    const c = src[i]
    const n = src[i + 1]
    if (c === '/' && n === '/') {
      while (i < src.length && src[i] !== '\n') { out += ' '; i++ }
    } else if (c === '/' && n === '*') {
      const end = src.indexOf('*/', i + 2)
      const stop = end < 0 ? src.length : end + 2
      out += src.slice(i, stop).replace(/[^\n]/g, ' ')
      i = stop
    } else if (c === 'R' && n === '"' && !/\w/.test(src[i - 1] ?? '')) {
      const open = src.indexOf('(', i + 2)
      const delim = src.slice(i + 2, open)
      const end = src.indexOf(`)${delim}"`, open)
      const stop = end < 0 ? src.length : end + delim.length + 2
      out += src.slice(i, stop)
      i = stop
    } else if (c === '"' || c === "'") {
      let j = i + 1
      while (j < src.length && src[j] !== c && src[j] !== '\n') j += src[j] === '\\' ? 2 : 1
      out += src.slice(i, j + 1)
      i = j + 1
    } else {
      out += c
      i++
    }
  }
  return out
}

// The top-level arguments of the call whose '(' is at `open`, trimmed.
export function callArguments(src, open) {
  const args = []
  let depth = 0
  let start = open + 1
  for (let i = open; i < src.length; i++) {
    const c = src[i]
    if (c === '"' || c === "'") {
      let j = i + 1
      while (j < src.length && src[j] !== c) j += src[j] === '\\' ? 2 : 1
      i = j
    } else if ('({['.includes(c)) {
      depth++
    } else if (')}]'.includes(c)) {
      depth--
      if (depth === 0) {
        args.push(src.slice(start, i).trim())
        return args.filter((a, k) => a !== '' || k > 0)
      }
    } else if (c === ',' && depth === 1) {
      args.push(src.slice(start, i).trim())
      start = i + 1
    }
  }
  throw new Error(`unbalanced call at offset ${open}`)
}

// resource.h's constants: {kPods: {group: '', plural: 'pods', namespaced: true}, ...}.
export function resourceConstants(headerText) {
  const out = {}
  const re = /constexpr\s+ResourceType\s+(k\w+)\s*\{\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*"[^"]*"\s*(?:,\s*(true|false))?/g
  for (const m of stripComments(headerText).matchAll(re)) {
    out[m[1]] = {group: m[2], plural: m[4], namespaced: m[5] !== 'false'}
  }
  return out
}

const lineOf = (src, offset) => src.slice(0, offset).split('\n').length

// Every API call in one file's source: [{constant, verb, subresource, line}],
// plus `unresolved` client calls whose resource is not a constant, and the
// verbs of calls on `forwardVar` (informer.cc's type_).
export function scanSource(src, {forwardVar} = {}) {
  const text = stripComments(src)
  const calls = []
  const unresolved = []
  const forwarded = []
  const constant = /^(?:(?:::)?kubetrain::)?(?:kube::)?(k[A-Z]\w*)$/
  const methodRe = new RegExp(`([\\w.\\]\\[]*(?:->|\\.))\\s*(${METHODS.join('|')})\\s*\\(`, 'g')
  for (const m of text.matchAll(methodRe)) {
    const receiver = m[1].replace(/(->|\.)$/, '')
    const method = m[2]
    const open = m.index + m[0].length - 1
    const args = callArguments(text, open)
    const line = lineOf(text, m.index)
    const c = (args[0] ?? '').match(constant)
    let subresource = ''
    if (method === 'UpdateStatus') subresource = 'status'
    if (method === 'MergePatch' && args.length >= 5) {
      const s = args[4].match(/^"([^"]*)"$/)
      if (!s) {
        unresolved.push({line, call: `${method}(${args.join(', ')})`, why: 'subresource is not a literal'})
        continue
      }
      subresource = s[1]
    }
    if (c) {
      calls.push({constant: c[1], verb: VERB[method], subresource, line})
    } else if (forwardVar && args[0] === forwardVar) {
      forwarded.push({verb: VERB[method], subresource, line})
    } else if (/client/i.test(receiver)) {
      unresolved.push({line, call: `${receiver}.${method}(${args.join(', ')})`, why: 'resource is not a constant'})
    }
  }
  // kube::Informer: std::make_unique<kube::Informer>(client, kube::kX, ...),
  // kube::Informer name(client, kube::kX, ...) or Informer{...}.
  const informerRe = /\bInformer\b(?:\s*>\s*\(|\s+\w+\s*[({]|\s*[({])/g
  for (const m of text.matchAll(informerRe)) {
    const open = m.index + m[0].length - 1
    const before = text.slice(Math.max(0, m.index - 40), m.index)
    if (/Informer::\s*$/.test(before) || /\bclass\s+$/.test(before)) continue
    const args = callArguments(text, open)
    const line = lineOf(text, m.index)
    if (args.length < 2) continue  // a declaration such as `Informer(const Informer&)`
    const c = args[1].match(constant)
    if (c) calls.push({constant: c[1], verb: 'informer', subresource: '', line})
    else if (!/ResourceType/.test(args[1])) unresolved.push({line, call: `Informer(${args.join(', ')})`, why: 'resource is not a constant'})
  }
  return {calls, unresolved, forwarded}
}

function ccFiles(dir) {
  const out = []
  for (const e of readdirSync(dir).sort()) {
    const p = join(dir, e)
    if (statSync(p).isDirectory()) out.push(...ccFiles(p))
    else if (e.endsWith('.cc') && !/_test\.cc$/.test(e)) out.push(p)
  }
  return out
}

// {rules: {"group/plural[/sub]": [verbs]}, uses: [{rule, verb, where}]}, from
// the operator's source under `root`. Throws when a call cannot be resolved.
export function deriveOperatorRules(root) {
  const resources = resourceConstants(readFileSync(join(root, 'operator/kube/resource.h'), 'utf8'))
  if (Object.keys(resources).length === 0) throw new Error('no ResourceType constants in operator/kube/resource.h')
  const informer = scanSource(readFileSync(join(root, 'operator/kube/informer.cc'), 'utf8'), {forwardVar: 'type_'})
  const informerVerbs = [...new Set(informer.forwarded.map((f) => f.verb))].sort()
  if (informerVerbs.length === 0) throw new Error('operator/kube/informer.cc: no client calls on type_ found')
  const rules = {}
  const uses = []
  const problems = []
  const add = (rule, verb, where, namespaced) => {
    rules[rule] = [...new Set([...(rules[rule] ?? []), verb])].sort()
    uses.push({rule, verb, where, file: where.split(':')[0], namespaced})
  }
  for (const file of ccFiles(join(root, 'operator'))) {
    const rel = relative(root, file)
    const {calls, unresolved} = scanSource(readFileSync(file, 'utf8'))
    if (!FORWARDERS.includes(rel)) {
      for (const u of unresolved) problems.push(`${rel}:${u.line}: ${u.why}: ${u.call}`)
    }
    for (const call of calls) {
      const r = resources[call.constant]
      if (!r) {
        problems.push(`${rel}:${call.line}: ${call.constant} is not a ResourceType in operator/kube/resource.h`)
        continue
      }
      const rule = `${r.group}/${r.plural}${call.subresource ? `/${call.subresource}` : ''}`
      const verbs = call.verb === 'informer' ? informerVerbs : [call.verb]
      for (const v of verbs) add(rule, v, `${rel}:${call.line}${call.verb === 'informer' ? ' (Informer)' : ''}`, r.namespaced)
    }
  }
  if (problems.length) throw new Error(`cannot derive the operator's permissions:\n  ${problems.join('\n  ')}`)
  return {rules, uses, informerVerbs}
}

// The derived rules plus the documented exceptions, for an operator run with
// `gangScheduler` ("" or "volcano"), cluster-wide or `namespaced`, with the
// admission `webhook` on or off and its certificate from
// `webhookCertSecret` (a mounted Secret) or its own: CONDITIONAL rules only
// when their values say so. The NAMED calls are not here (requiredNamedRules).
export function requiredRules(root, options = {}) {
  const values = chartValues(options)
  const {uses} = deriveOperatorRules(root)
  const out = {}
  for (const u of uses) {
    if (NAMED[u.file]?.rules[u.rule]) continue
    const c = CONDITIONAL[u.rule]
    if (c && (!c.verbs || c.verbs.includes(u.verb)) && !holds(c.when, values)) continue
    out[u.rule] = [...new Set([...(out[u.rule] ?? []), u.verb])].sort()
  }
  for (const [k, v] of Object.entries(EXCEPTIONS)) out[k] = [...new Set([...(out[k] ?? []), ...v])].sort()
  return out
}

// The NAMED calls as rules, for the object names an install gives the flags
// (`names`: flag -> name) and the options of requiredRules:
// {namespaced: {...}, cluster: {...}}, the Role in the operator's own
// namespace and the ClusterRole. A verb limited to one object is the rule
// "group/plural:name"; create stays "group/plural".
export function requiredNamedRules(root, {names = {}, ...options} = {}) {
  const values = chartValues(options)
  const {uses} = deriveOperatorRules(root)
  const out = {namespaced: {}, cluster: {}}
  for (const u of uses) {
    const n = NAMED[u.file]
    const flag = n?.rules[u.rule]
    if (!flag || !holds(n.when, values)) continue
    if (u.verb !== 'create' && !names[flag]) throw new Error(`requiredNamedRules: no name given for ${flag}`)
    const k = u.verb === 'create' ? u.rule : `${u.rule}:${names[flag]}`
    const role = out[u.namespaced ? 'namespaced' : 'cluster']
    role[k] = [...new Set([...(role[k] ?? []), u.verb])].sort()
  }
  return out
}
