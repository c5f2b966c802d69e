// The "restricted" Pod Security Standard (https://kubernetes.io/docs/concepts/security/pod-security-standards/,
// the baseline rules plus the restricted ones, as the PodSecurity admission
// controller enforces them from Kubernetes 1.25): every pod kubetrain ships
// passes it, so it runs in a namespace labelled
// pod-security.kubernetes.io/enforce: restricted. Checked: the operator's
// Deployment as `helm template` renders it (default and every values file) and
// as `kubectl kustomize` renders deploy/base and each overlay; every replica
// pod template in examples/ and in the chart's NOTES.txt job (the operator
// copies the template's spec into the pod and adds only env, ports, labels,
// annotations, restartPolicy and, with Volcano, schedulerName: nothing these
// rules look at). Examples also carry cpu and memory requests. The checker
// itself is tested on pods that break one rule each.
import {test} from 'node:test'
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {loadYamlDocuments, loadYamlFile} from '../../tools/node/lib/crd.mjs'
import {CHART, ROOT, helmTemplate, requireTool, run} from './tools.mjs'

const helm = requireTool('helm')
const kubectl = requireTool('kubectl')

// Baseline: capabilities that may be added.
const BASELINE_CAPS = new Set(['AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD',
  'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT'])
const SAFE_SYSCTLS = new Set(['kernel.shm_rmid_forced', 'net.ipv4.ip_local_port_range', 'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies', 'net.ipv4.ping_group_range', 'net.ipv4.ip_local_reserved_ports', 'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes'])
const SELINUX_TYPES = new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'])
const RESTRICTED_VOLUMES = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim',
  'projected', 'secret'])

// The violations of the restricted profile in a pod's metadata + spec, as
// "rule: where" strings; [] when it passes.
export function restrictedViolations(spec, metadata = {}) {
  const v = []
  const podSc = spec.securityContext ?? {}
  const containers = [
    ...(spec.initContainers ?? []).map((c) => ['initContainers', c]),
    ...(spec.containers ?? []).map((c) => ['containers', c]),
    ...(spec.ephemeralContainers ?? []).map((c) => ['ephemeralContainers', c]),
  ]
  const where = ([kind, c]) => `${kind}[${c.name}]`

  // Baseline.
  for (const f of ['hostNetwork', 'hostPID', 'hostIPC']) if (spec[f] === true) v.push(`host namespaces: ${f}`)
  if (podSc.windowsOptions?.hostProcess === true) v.push('hostProcess: pod')
  for (const vol of spec.volumes ?? []) {
    if (vol.hostPath) v.push(`hostPath volumes: ${vol.name}`)
    const types = Object.keys(vol).filter((k) => k !== 'name')
    for (const t of types) if (!RESTRICTED_VOLUMES.has(t)) v.push(`volume types: ${vol.name} (${t})`)
  }
  for (const s of podSc.sysctls ?? []) if (!SAFE_SYSCTLS.has(s.name)) v.push(`sysctls: ${s.name}`)
  const checkSeLinux = (o, w) => {
    if (!o) return
    if (!SELINUX_TYPES.has(o.type ?? '')) v.push(`SELinux: ${w} type ${o.type}`)
    if (o.user || o.role) v.push(`SELinux: ${w} user/role`)
  }
  checkSeLinux(podSc.seLinuxOptions, 'pod')
  for (const [k, val] of Object.entries(metadata.annotations ?? {})) {
    if (k.startsWith('container.apparmor.security.beta.kubernetes.io/') && val !== 'runtime/default' && !val.startsWith('localhost/')) {
      v.push(`AppArmor: ${k}`)
    }
  }
  const checkAppArmor = (p, w) => {
    if (p && !['RuntimeDefault', 'Localhost'].includes(p.type)) v.push(`AppArmor: ${w} ${p.type}`)
  }
  checkAppArmor(podSc.appArmorProfile, 'pod')

  // Restricted: pod-level settings that containers may inherit.
  if (podSc.runAsUser === 0) v.push('runAsUser: pod is 0')
  if (podSc.seccompProfile && !['RuntimeDefault', 'Localhost'].includes(podSc.seccompProfile.type)) {
    v.push(`seccomp: pod ${podSc.seccompProfile.type}`)
  }
  if (containers.length === 0) v.push('no containers')
  for (const entry of containers) {
    const [, c] = entry
    const sc = c.securityContext ?? {}
    const w = where(entry)
    if (sc.privileged === true) v.push(`privileged: ${w}`)
    if (sc.windowsOptions?.hostProcess === true) v.push(`hostProcess: ${w}`)
    for (const p of c.ports ?? []) if (p.hostPort) v.push(`host ports: ${w} ${p.hostPort}`)
    checkSeLinux(sc.seLinuxOptions, w)
    checkAppArmor(sc.appArmorProfile, w)
    if (sc.procMount && sc.procMount !== 'Default') v.push(`/proc mount: ${w}`)
    for (const cap of sc.capabilities?.add ?? []) {
      if (!BASELINE_CAPS.has(cap)) v.push(`capabilities (baseline): ${w} adds ${cap}`)
      else if (cap !== 'NET_BIND_SERVICE') v.push(`capabilities: ${w} adds ${cap}`)
    }
    if (!(sc.capabilities?.drop ?? []).includes('ALL')) v.push(`capabilities: ${w} does not drop ALL`)
    if (sc.allowPrivilegeEscalation !== false) v.push(`privilege escalation: ${w} allowPrivilegeEscalation is not false`)
    const nonRoot = sc.runAsNonRoot ?? podSc.runAsNonRoot
    if (nonRoot !== true) v.push(`running as non-root: ${w} runAsNonRoot is not true`)
    if (sc.runAsUser === 0) v.push(`runAsUser: ${w} is 0`)
    const seccomp = sc.seccompProfile?.type ?? podSc.seccompProfile?.type
    if (!['RuntimeDefault', 'Localhost'].includes(seccomp)) v.push(`seccomp: ${w} ${seccomp ?? 'unset'}`)
  }
  return v
}

// A pod as the operator builds it from one replica spec's template.
function replicaPods(job, file) {
  return Object.entries(job.spec.replicaSpecs).map(([type, rs]) => ({
    what: `${file} ${type}`,
    metadata: rs.template.metadata ?? {},
    spec: rs.template.spec,
  }))
}

function deploymentPods(objs, what) {
  const deps = objs.filter((o) => o.kind === 'Deployment')
  assert.ok(deps.length > 0, `${what}: no Deployment`)
  return deps.map((d) => ({what: `${what} ${d.metadata.name}`, metadata: d.spec.template.metadata, spec: d.spec.template.spec}))
}

const EXAMPLES = readdirSync(join(ROOT, 'examples')).filter((f) => f.endsWith('.yaml')).sort()

test('the checker refuses a pod that breaks any one restricted rule', () => {
  const good = () => ({
    securityContext: {runAsNonRoot: true, seccompProfile: {type: 'RuntimeDefault'}},
    containers: [{name: 'c', image: 'i', securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: ['ALL']}}}],
  })
  assert.deepEqual(restrictedViolations(good()), [])
  const c0 = (p) => p.containers[0]
  const breakers = {
    'no runAsNonRoot': (p) => { delete p.securityContext.runAsNonRoot },
    'container runAsNonRoot false': (p) => { c0(p).securityContext.runAsNonRoot = false },
    'runAsUser 0': (p) => { p.securityContext.runAsUser = 0 },
    'no seccomp': (p) => { delete p.securityContext.seccompProfile },
    'seccomp Unconfined in a container': (p) => { c0(p).securityContext.seccompProfile = {type: 'Unconfined'} },
    'privilege escalation unset': (p) => { delete c0(p).securityContext.allowPrivilegeEscalation },
    'capabilities not dropped': (p) => { c0(p).securityContext.capabilities = {} },
    'adds NET_ADMIN': (p) => { c0(p).securityContext.capabilities.add = ['NET_ADMIN'] },
    'adds CHOWN': (p) => { c0(p).securityContext.capabilities.add = ['CHOWN'] },
    privileged: (p) => { c0(p).securityContext.privileged = true },
    hostNetwork: (p) => { p.hostNetwork = true },
    hostPort: (p) => { c0(p).ports = [{containerPort: 80, hostPort: 80}] },
    'hostPath volume': (p) => { p.volumes = [{name: 'h', hostPath: {path: '/'}}] },
    'an init container without a security context': (p) => { p.initContainers = [{name: 'init', image: 'i'}] },
    'unsafe sysctl': (p) => { p.securityContext.sysctls = [{name: 'kernel.msgmax', value: '1'}] },
  }
  for (const [name, mutate] of Object.entries(breakers)) {
    const p = good()
    mutate(p)
    assert.notDeepEqual(restrictedViolations(p), [], name)
  }
  // Allowed: NET_BIND_SERVICE, an emptyDir, Localhost seccomp on the container.
  const ok = good()
  c0(ok).securityContext.capabilities.add = ['NET_BIND_SERVICE']
  ok.volumes = [{name: 'tmp', emptyDir: {}}]
  c0(ok).securityContext.seccompProfile = {type: 'Localhost', localhostProfile: 'p.json'}
  assert.deepEqual(restrictedViolations(ok), [])
})

test('every example replica pod passes restricted and requests cpu and memory', () => {
  for (const f of EXAMPLES) {
    for (const [job] of [loadYamlFile(join(ROOT, 'examples', f))]) {
      for (const pod of replicaPods(job, f)) {
        assert.deepEqual(restrictedViolations(pod.spec, pod.metadata), [], pod.what)
        for (const c of pod.spec.containers) {
          assert.ok(c.resources?.requests?.cpu && c.resources?.requests?.memory, `${pod.what} ${c.name}: cpu and memory requests`)
        }
      }
    }
  }
})

test("the chart's operator Deployment passes restricted with default and every values file", () => {
  const values = readdirSync(join(ROOT, 'tests/packaging/values')).filter((f) => f.endsWith('.yaml')).sort()
  for (const v of [undefined, ...values]) {
    const objs = helmTemplate(helm, {values: v && join(ROOT, 'tests/packaging/values', v)})
    for (const pod of deploymentPods(objs, `helm ${v ?? 'defaults'}`)) {
      assert.deepEqual(restrictedViolations(pod.spec, pod.metadata), [], pod.what)
    }
  }
})

test('deploy/base and every overlay: the operator passes restricted, its namespace enforces it', () => {
  for (const dir of ['deploy/base', 'deploy/overlays/namespaced', 'deploy/overlays/monitoring']) {
    const objs = loadYamlDocuments(run(kubectl, ['kustomize', join(ROOT, dir)]), dir)
    for (const pod of deploymentPods(objs, dir)) {
      assert.deepEqual(restrictedViolations(pod.spec, pod.metadata), [], pod.what)
    }
    const ns = objs.find((o) => o.kind === 'Namespace' && o.metadata.name === 'kubetrain-system')
    assert.equal(ns.metadata.labels['pod-security.kubernetes.io/enforce'], 'restricted', dir)
  }
})

// NOTES.txt, rendered through tpl in a copy of the chart (as helm.test.mjs
// does): the first job a user runs passes too.
test("NOTES.txt's first job passes restricted", () => {
  const tmp = mkdtempSync(join(tmpdir(), 'kubetrain-pss-'))
  try {
    const chart = join(tmp, 'kubetrain')
    cpSync(CHART, chart, {recursive: true, dereference: true})
    cpSync(join(chart, 'templates/NOTES.txt'), join(chart, 'notes.txt'))
    writeFileSync(join(chart, 'templates/notes-for-test.yaml'),
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}\n')
    const notes = helmTemplate(helm, {chart}).find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'notes').data.notes
    const [job] = loadYamlDocuments(notes.match(/<<'YAML'[^\n]*\n([\s\S]*?)\nYAML\n/)[1], 'NOTES.txt')
    const pods = replicaPods(job, 'NOTES.txt')
    assert.equal(pods.length, 2)
    for (const pod of pods) assert.deepEqual(restrictedViolations(pod.spec, pod.metadata), [], pod.what)
  } finally {
    rmSync(tmp, {recursive: true, force: true})
  }
})
