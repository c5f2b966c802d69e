// The Dockerfile's structure (no Docker engine here): a build stage on
// debian:bookworm that runs scripts/setup.sh, make build and make test; a slim
// runtime stage with both binaries, Fashion-MNIST, a non-root user and
// ENTRYPOINT kubetrain; every COPY source exists in the repository (and is not
// .dockerignored) or is made by the stage it is copied from.
import {test} from 'node:test'
import assert from 'node:assert/strict'
import {existsSync, readFileSync, readdirSync} from 'node:fs'
import {join} from 'node:path'

const ROOT = new URL('../..', import.meta.url).pathname

// Instructions with continuations joined and comments dropped.
function parseDockerfile(text) {
  const out = []
  let cur = ''
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (cur === '' && (line === '' || line.startsWith('#'))) continue
    if (line.startsWith('#')) continue
    if (line.endsWith('\\')) {
      cur += line.slice(0, -1) + ' '
      continue
    }
    cur += line
    const m = cur.match(/^(\w+)\s+([\s\S]*)$/)
    if (m) out.push({op: m[1].toUpperCase(), args: m[2].trim()})
    cur = ''
  }
  return out
}

const instructions = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))
const globalArgs = {}
const stages = []
for (const ins of instructions) {
  if (ins.op === 'FROM') {
    const m = ins.args.match(/^(\S+)(?:\s+AS\s+(\S+))?$/i)
    stages.push({from: m[1], name: m[2], steps: [], args: {}})
  } else if (stages.length === 0) {
    assert.equal(ins.op, 'ARG', 'only ARG may precede the first FROM')
    const [k, v] = ins.args.split('=')
    globalArgs[k] = v
  } else {
    stages.at(-1).steps.push(ins)
    if (ins.op === 'ARG') {
      const [k, v] = ins.args.split('=')
      stages.at(-1).args[k] = v ?? ''
    }
  }
}
const resolve = (image) => image.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => globalArgs[a ?? b] ?? '')
const build = stages[0]
const runtime = stages.at(-1)
const runs = (stage) => stage.steps.filter((s) => s.op === 'RUN').map((s) => s.args)

test('two stages: build on debian:bookworm, runtime on debian:bookworm-slim, bases as build args', () => {
  assert.equal(stages.length, 2)
  assert.equal(build.name, 'build')
  assert.equal(resolve(build.from), 'debian:bookworm')
  assert.equal(resolve(runtime.from), 'debian:bookworm-slim')
  // The CUDA variant swaps the bases.
  assert.match(build.from, /\$\{?BASE_IMAGE/)
  assert.match(runtime.from, /\$\{?RUNTIME_IMAGE/)
})

test('the build stage runs exactly scripts/setup.sh, make build and make test', () => {
  const r = runs(build)
  assert.ok(r.includes('bash scripts/setup.sh'), r.join('\n'))
  assert.ok(r.some((x) => /^make build\b/.test(x)), 'make build')
  const t = r.find((x) => /\bmake test\b/.test(x))
  assert.ok(t, 'make test')
  assert.ok('RUN_TESTS' in build.args && build.args.RUN_TESTS === '1', 'ARG RUN_TESTS=1 to skip the tests')
  assert.match(t, /RUN_TESTS/)
  // No package manager calls of its own: setup.sh is the one list.
  assert.ok(!r.some((x) => /apt-get|npm /.test(x)), 'the build stage installs through scripts/setup.sh only')
})

test('the runtime stage: binaries, their libraries, Fashion-MNIST, non-root, ENTRYPOINT kubetrain', () => {
  const copies = runtime.steps.filter((s) => s.op === 'COPY').map((s) => s.args)
  for (const bin of ['kubetrain', 'kubetrain-operator']) {
    assert.ok(copies.some((c) => c.startsWith('--from=build') && c.endsWith(`/usr/local/bin/${bin}`)), bin)
  }
  const install = runs(runtime).join('\n')
  assert.match(install, /dataset-fashion-mnist/)
  assert.match(install, /runtime-packages\.txt/)
  const dataDir = readFileSync(join(ROOT, 'runtime/train/train_options.h'), 'utf8').match(/data_dir = "([^"]+)"/)[1]
  assert.equal(dataDir, '/usr/share/datasets/fashion-mnist', 'the image ships the runtime default data directory')
  const users = runtime.steps.filter((s) => s.op === 'USER')
  assert.equal(users.length, 1)
  const user = users[0].args.split(':')[0]
  assert.ok(user !== 'root' && user !== '0', `USER ${user}`)
  assert.ok(runtime.steps.findIndex((s) => s.op === 'USER') > runtime.steps.findLastIndex((s) => s.op === 'RUN'), 'USER after the last RUN')
  if (/^\d+$/.test(user)) assert.match(install, new RegExp(`--uid ${user}\\b`))
  const entry = runtime.steps.filter((s) => s.op === 'ENTRYPOINT')
  assert.equal(entry.length, 1)
  assert.deepEqual(JSON.parse(entry[0].args), ['/usr/local/bin/kubetrain'])
  // The chart runs the operator as that user with a read-only root filesystem.
  const dep = readFileSync(join(ROOT, 'charts/kubetrain/templates/deployment.yaml'), 'utf8')
  assert.match(dep, new RegExp(`runAsUser: ${user}\\b`))
  assert.match(dep, /command: \[\/usr\/local\/bin\/kubetrain-operator\]/)
})

function dockerignored(path) {
  const patterns = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n')
    .map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
  return patterns.some((p) => {
    const re = new RegExp('^' + p.replace(/\./g, '\\.').replace(/\*\*\//g, '\0').replace(/\*/g, '[^/]*')
      .replace(/\0/g, '(.*/)?') + '(/|$)')
    return re.test(path)
  })
}

test('every COPY source exists in the repository or in the stage it comes from', () => {
  for (const stage of stages) {
    for (const s of stage.steps.filter((x) => x.op === 'COPY')) {
      const words = s.args.split(/\s+/)
      const from = words.find((w) => w.startsWith('--from='))?.slice(7)
      const paths = words.filter((w) => !w.startsWith('--'))
      const sources = paths.slice(0, -1)
      assert.ok(sources.length > 0, s.args)
      for (const src of sources) {
        if (from) {
          const producer = stages.find((x) => x.name === from)
          assert.ok(producer, `COPY --from=${from}: no such stage`)
          // Made by a RUN of that stage (cp/strip into it, or a redirect).
          assert.ok(runs(producer).some((r) => r.includes(src) || r.includes(src.replace(/\/[^/]+$/, '/'))),
            `${src} is not made in stage ${from}`)
        } else if (src !== '.') {
          assert.ok(existsSync(join(ROOT, src)), `${src} does not exist`)
          assert.ok(!dockerignored(src), `${src} is excluded by .dockerignore`)
        }
      }
    }
  }
})

test('.dockerignore keeps build outputs, caches and node_modules out of the context', () => {
  for (const p of ['.git', '.cache/tools/bin/helm', 'build/runtime/kubetrain', 'build-pkg/x', 'tools/node/node_modules/ajv']) {
    assert.ok(dockerignored(p), p)
  }
  for (const p of ['scripts/setup.sh', 'tools/node/package-lock.json', 'runtime/main.cc', 'CMakeLists.txt']) {
    assert.ok(!dockerignored(p), p)
  }
})

// `make build` (cmake --build $(BUILD_DIR), BUILD_DIR=build) leaves each
// executable in build/<the directory of its CMakeLists.txt>/ unless an output
// directory or name is set; the build stage copies both from there and the
// runtime stage installs them in /usr/local/bin.
test('the binaries the build stage copies are CMake targets `make build` builds', () => {
  assert.match(readFileSync(join(ROOT, 'Makefile'), 'utf8'), /^BUILD_DIR \?= build$/m)
  const cp = runs(build).find((r) => r.includes('/out/bin/'))
  for (const [dir, bin] of [['runtime', 'kubetrain'], ['operator', 'kubetrain-operator']]) {
    assert.match(cp, new RegExp(`\\bbuild/${dir}/${bin}\\b`), `the build stage copies build/${dir}/${bin}`)
    assert.match(cp, new RegExp(`\\bstrip\\b[^&]*/out/bin/${bin}\\b`), `the build stage strips ${bin}`)
    const cmake = readFileSync(join(ROOT, dir, 'CMakeLists.txt'), 'utf8')
    const add = cmake.match(new RegExp(`add_executable\\(${bin}\\b[^)]*\\)`))
    assert.ok(add, `${dir}/CMakeLists.txt: no add_executable(${bin})`)
    assert.ok(!/EXCLUDE_FROM_ALL/.test(add[0]), `${bin} is EXCLUDE_FROM_ALL: make build would not build it`)
    assert.ok(!new RegExp(`set_target_properties\\(${bin}\\b[^)]*(OUTPUT_DIRECTORY|OUTPUT_NAME)`).test(cmake),
      `${bin}: an output directory or name moves it away from build/${dir}/${bin}`)
    const copy = runtime.steps.filter((st) => st.op === 'COPY').map((st) => st.args)
    assert.ok(copy.includes(`--from=build /out/bin/${bin} /usr/local/bin/${bin}`),
      `the runtime stage copies ${bin} to /usr/local/bin/${bin}`)
  }
  const cmakeFiles = ['CMakeLists.txt', ...readdirSync(join(ROOT, 'cmake')).filter((f) => f.endsWith('.cmake')).map((f) => `cmake/${f}`)]
  for (const f of cmakeFiles) {
    assert.ok(!/CMAKE_RUNTIME_OUTPUT_DIRECTORY/.test(readFileSync(join(ROOT, f), 'utf8')), `${f} sets CMAKE_RUNTIME_OUTPUT_DIRECTORY`)
  }
})
