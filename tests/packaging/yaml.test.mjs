// Every YAML and JSON file we ship parses: crds/, charts/ (templates are Go
// templates: helm.test.mjs parses what they render), deploy/, examples/ and
// the test inputs. Duplicate keys are errors, as in the API server.
import {test} from 'node:test'
import assert from 'node:assert/strict'
import {readFileSync, readdirSync, statSync} from 'node:fs'
import {join, relative} from 'node:path'
import {loadYamlDocuments} from '../../tools/node/lib/crd.mjs'

const ROOT = new URL('../..', import.meta.url).pathname

function* walk(dir) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) {
      if (name !== 'node_modules' && name !== 'templates') yield* walk(p)
    } else {
      yield p
    }
  }
}

test('every YAML/JSON file parses', () => {
  let n = 0
  for (const top of ['crds', 'charts', 'deploy', 'examples', 'tests/packaging']) {
    for (const file of walk(join(ROOT, top))) {
      const rel = relative(ROOT, file)
      const text = readFileSync(file, 'utf8')
      if (/\.ya?ml$/.test(file)) {
        const docs = loadYamlDocuments(text, rel)
        assert.ok(docs.length > 0, `${rel}: no document`)
        n++
      } else if (file.endsWith('.json')) {
        assert.doesNotThrow(() => JSON.parse(text), rel)
        n++
      }
    }
  }
  assert.ok(n >= 40, `only ${n} files`)
  console.log(`${n} files parsed`)
})

// deploy/prometheus and deploy/grafana hold Prometheus and Grafana files, not
// Kubernetes objects.
test('Kubernetes objects in crds/, deploy/{base,overlays} and examples/ name their apiVersion, kind and name', () => {
  for (const top of ['crds', 'deploy/base', 'deploy/overlays', 'examples']) {
    for (const file of walk(join(ROOT, top))) {
      if (!/\.ya?ml$/.test(file)) continue
      for (const doc of loadYamlDocuments(readFileSync(file, 'utf8'), file)) {
        if (doc.kind === 'Kustomization') continue
        assert.ok(doc.apiVersion && doc.kind && doc.metadata?.name, `${relative(ROOT, file)}: incomplete object`)
      }
    }
  }
})
