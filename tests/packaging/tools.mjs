// Shared helpers for the packaging tests: the repository root, helm and
// kubectl from scripts/setup.sh's cache (or KUBETRAIN_HELM / KUBETRAIN_KUBECTL),
// and running them. A test whose tool is missing prints a line starting with
// "SKIP:" (CTest's SKIP_REGULAR_EXPRESSION) and exits 0.
import {execFileSync} from 'node:child_process'
import {accessSync, constants} from 'node:fs'
import {join} from 'node:path'
import {loadYamlDocuments} from '../../tools/node/lib/crd.mjs'

export const ROOT = new URL('../..', import.meta.url).pathname.replace(/\/$/, '')
export const CHART = join(ROOT, 'charts/kubetrain')

function executable(path) {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

// The tool's path, or exits the process as skipped.
export function requireTool(name) {
  const env = process.env[`KUBETRAIN_${name.toUpperCase()}`]
  const path = env || join(ROOT, '.cache/tools/bin', name)
  if (!executable(path)) {
    console.log(`SKIP: ${name} not found at ${path}; scripts/setup.sh installs it`)
    process.exit(0)
  }
  return path
}

export function run(tool, args, {expectFailure = false} = {}) {
  try {
    const out = execFileSync(tool, args, {encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20})
    if (expectFailure) throw new Error(`${tool} ${args.join(' ')} succeeded; expected a failure`)
    return out
  } catch (err) {
    if (expectFailure && err.status !== undefined) return `${err.stdout}${err.stderr}`
    throw new Error(`${tool} ${args.join(' ')} failed (${err.status}):\n${err.stdout ?? ''}${err.stderr ?? err.message}`)
  }
}

// helm template with a values file (or none) -> parsed objects.
export function helmTemplate(helm, {values, set = [], chart = CHART, release = 'kubetrain', namespace = 'kubetrain-system', crds = false} = {}) {
  const args = ['template', release, chart, '--namespace', namespace]
  if (crds) args.push('--include-crds')
  if (values) args.push('--values', values)
  for (const s of set) args.push('--set', s)
  return loadYamlDocuments(run(helm, args), `helm template ${values ?? ''}`)
}

export const key = (o) => `${o.kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name}`
