// Metrics, alerts and the dashboard agree with each other and with the code,
// whatever path Prometheus scrapes them by:
// - the queries (alert rules, dashboard) use only labels the runtime or the
//   operator write (api/metric_names.h, runtime/metrics/metric_names.h,
//   operator/metrics/metric_names.h)
//   plus `le`, never a target label such as job or namespace, which
//   Prometheus owns (a PodMonitor without honorLabels renames the exporter's
//   own to exported_job);
// - every alert has a summary, a description and a runbook_url into
//   docs/runbooks.md (whose heading exists), and a promtool test with a
//   firing case in alert-rules-test.yaml;
// - deploy/overlays/monitoring/prometheusrule.yaml holds exactly
//   alert-rules.yaml's groups (`node tests/packaging/monitoring.test.mjs
//   --write-prometheusrule` regenerates it);
// - deploy/prometheus/scrape-config.yaml: no honor_labels, keeps the pods the
//   operator and the chart annotate.
import {test} from 'node:test'
import assert from 'node:assert/strict'
import {readFileSync, writeFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import {join} from 'node:path'
import {loadYamlFile} from '../../tools/node/lib/crd.mjs'
import {ROOT} from './tools.mjs'

const RULES = join(ROOT, 'deploy/prometheus/alert-rules.yaml')
const OVERLAY_RULE = join(ROOT, 'deploy/overlays/monitoring/prometheusrule.yaml')
const RUNBOOKS = join(ROOT, 'docs/runbooks.md')
const RUNBOOK_BASE = 'https://github.com/kubetrain/kubetrain/blob/main/docs/runbooks.md#'

const OVERLAY_HEADER = `# deploy/prometheus/alert-rules.yaml as a PrometheusRule: the same groups,
# generated from it (tests/packaging/kustomize.test.mjs and monitoring.test.mjs
# fail when the two differ). After changing the rules, regenerate:
#   node tests/packaging/monitoring.test.mjs --write-prometheusrule
# Label it to match your Prometheus's ruleSelector (kube-prometheus-stack:
# release: <its release>), e.g. with a kustomize labels patch.
`
const LABELS = {
  'app.kubernetes.io/name': 'kubetrain', 'app.kubernetes.io/instance': 'kubetrain',
  'app.kubernetes.io/component': 'operator', 'app.kubernetes.io/version': '0.1.0', 'app.kubernetes.io/part-of': 'kubetrain',
}
function overlayRule() {
  const rules = loadYamlFile(RULES)[0]
  return {
    apiVersion: 'monitoring.coreos.com/v1', kind: 'PrometheusRule',
    metadata: {name: 'kubetrain-alerts', namespace: 'kubetrain-system', labels: LABELS},
    spec: {groups: rules.groups},
  }
}
if (process.argv.includes('--write-prometheusrule')) {
  const YAML = createRequire(join(ROOT, 'tools/node/package.json'))('yaml')
  writeFileSync(OVERLAY_RULE, OVERLAY_HEADER + YAML.stringify(overlayRule(), {lineWidth: 0}))
  console.log(`wrote ${OVERLAY_RULE}`)
  process.exit(0)
}

// Label names the exporters write: the string constants of the label
// declarations in the three metric_names.h files (api/ holds the constant
// labels the operator reads back).
function exportedLabels() {
  const out = new Set(['le'])
  const api = readFileSync(join(ROOT, 'api/metric_names.h'), 'utf8')
  for (const m of api.matchAll(/constexpr char kMetricLabel\w*\[\] = "([^"]+)"/g)) out.add(m[1])
  const runtime = readFileSync(join(ROOT, 'runtime/metrics/metric_names.h'), 'utf8')
  for (const m of runtime.matchAll(/constexpr char kLabel\w*\[\] = "([^"]+)"/g)) out.add(m[1])
  const operator = readFileSync(join(ROOT, 'operator/metrics/metric_names.h'), 'utf8')
  for (const m of operator.matchAll(/constexpr char k\w*Label\[\] = "([^"]+)"/g)) out.add(m[1])
  return out
}
const TARGET_LABELS = ['job', 'namespace', 'instance', 'pod', 'container', 'endpoint', 'service']

// Label names a PromQL expression uses: in {matchers} and in by/without/on/
// ignoring/group_left/group_right (...) lists. Strings are blanked first.
export function labelsUsed(expr) {
  const text = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""')
  const out = new Set()
  for (const m of text.matchAll(/\{([^{}]*)\}/g)) {
    for (const part of m[1].split(',')) {
      const name = part.trim().match(/^([a-zA-Z_]\w*)\s*(=~|!~|!=|=)/)
      if (name) out.add(name[1])
    }
  }
  for (const m of text.matchAll(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)/g)) {
    for (const l of m[1].split(',')) if (l.trim()) out.add(l.trim())
  }
  return out
}

function dashboardQueries() {
  const dash = JSON.parse(readFileSync(join(ROOT, 'deploy/grafana/kubetrain-dashboard.json'), 'utf8'))
  const out = []
  const walk = (o, where) => {
    if (Array.isArray(o)) return o.forEach((x, i) => walk(x, `${where}[${i}]`))
    if (!o || typeof o !== 'object') return
    for (const [k, v] of Object.entries(o)) {
      if (k === 'expr' && typeof v === 'string') out.push({where, expr: v})
      else if (k === 'query' && typeof v === 'string' && v.startsWith('label_values')) out.push({where, expr: v})
      else walk(v, `${where}.${k}`)
    }
  }
  walk(dash, 'dashboard')
  return {dash, queries: out}
}

const alerts = () => loadYamlFile(RULES)[0].groups.flatMap((g) => g.rules.filter((r) => r.alert))

test('labelsUsed reads matchers and grouping clauses', () => {
  assert.deepEqual([...labelsUsed('sum by (a, b) (rate(m{c="x,y", d=~"$v"}[5m])) and on (e) max(n{f!="}"})')].sort(),
    ['a', 'b', 'c', 'd', 'e', 'f'])
})

test('alert rules and dashboard queries use only the exporters\' labels, never target labels', () => {
  const allowed = exportedLabels()
  for (const l of ['training_job', 'training_namespace', 'replica_type', 'replica_index']) assert.ok(allowed.has(l), l)
  for (const l of TARGET_LABELS) assert.ok(!allowed.has(l), `${l} is a target label: the exporters must not write it`)
  const {queries} = dashboardQueries()
  assert.ok(queries.length > 30, 'dashboard queries found')
  const all = [...alerts().map((a) => ({where: a.alert, expr: a.expr})), ...queries]
  for (const {where, expr} of all) {
    for (const l of labelsUsed(expr)) assert.ok(allowed.has(l), `${where}: label ${l} in ${expr}`)
    const lv = expr.match(/^label_values\((?:[^,]*,\s*)?(\w+)\)$/)
    if (lv) assert.ok(allowed.has(lv[1]), `${where}: label_values of ${lv[1]}`)
  }
  // Legends name the same labels.
  const {dash} = dashboardQueries()
  for (const m of JSON.stringify(dash).matchAll(/\{\{(\w+)\}\}/g)) assert.ok(allowed.has(m[1]), `legend {{${m[1]}}}`)
})

test('every alert: summary, description, runbook_url into docs/runbooks.md', () => {
  const runbooks = readFileSync(RUNBOOKS, 'utf8')
  // GitHub's anchors: the heading lower-cased, spaces to -, punctuation dropped.
  const anchors = new Set([...runbooks.matchAll(/^#{1,6} (.+)$/gm)].map((m) =>
    m[1].trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')))
  const list = alerts()
  assert.ok(list.length >= 7)
  for (const a of list) {
    for (const k of ['summary', 'description', 'runbook_url']) assert.ok(a.annotations?.[k], `${a.alert}: no ${k}`)
    assert.ok(a.labels?.severity, `${a.alert}: no severity`)
    assert.ok(a.annotations.runbook_url.startsWith(RUNBOOK_BASE), a.annotations.runbook_url)
    const anchor = a.annotations.runbook_url.slice(RUNBOOK_BASE.length)
    assert.equal(anchor, a.alert.toLowerCase(), `${a.alert}: runbook anchor`)
    assert.ok(anchors.has(anchor), `docs/runbooks.md has no heading for #${anchor}`)
  }
})

test('every alert has a promtool test that fires it', () => {
  const tests = loadYamlFile(join(ROOT, 'deploy/prometheus/alert-rules-test.yaml'))[0].tests
  const fired = new Set()
  for (const t of tests) {
    for (const a of t.alert_rule_test ?? []) if ((a.exp_alerts ?? []).length > 0) fired.add(a.alertname)
    // Series are shaped as Prometheus stores them: with the target's job.
    for (const s of t.input_series) assert.match(s.series, /[{,]job="/, `input series without a target job: ${s.series}`)
  }
  for (const a of alerts()) assert.ok(fired.has(a.alert), `${a.alert}: no promtool test fires it`)
})

test('deploy/overlays/monitoring/prometheusrule.yaml is alert-rules.yaml', () => {
  const [rule] = loadYamlFile(OVERLAY_RULE)
  assert.deepEqual(rule, overlayRule(), 'regenerate: node tests/packaging/monitoring.test.mjs --write-prometheusrule')
})

test('scrape-config.yaml: no honor_labels; keeps the annotated pods', () => {
  const [cfg] = loadYamlFile(join(ROOT, 'deploy/prometheus/scrape-config.yaml'))
  const job = cfg.scrape_configs.find((j) => j.job_name === 'kubetrain-pods')
  assert.notEqual(job.honor_labels, true)
  const keep = job.relabel_configs.find((r) => r.action === 'keep')
  assert.deepEqual(keep.source_labels, ['__meta_kubernetes_pod_annotation_prometheus_io_scrape'])
  assert.equal(keep.regex, 'true')
  assert.ok(job.relabel_configs.some((r) => (r.source_labels ?? []).includes('__meta_kubernetes_pod_annotation_prometheus_io_port')))
  // The operator puts the same annotations on every replica pod.
  const builder = readFileSync(join(ROOT, 'operator/controller/replica_builder.cc'), 'utf8')
  assert.match(builder, /kPrometheusScrapeAnnotation, "true"/)
  assert.match(builder, /kPrometheusPortAnnotation, api::kMetricsPortString/)
  const ports = readFileSync(join(ROOT, 'api/ports.h'), 'utf8')
  assert.match(ports, /kPrometheusScrapeAnnotation\[\] = "prometheus\.io\/scrape";/)
  assert.match(ports, /kPrometheusPortAnnotation\[\] = "prometheus\.io\/port";/)
})
