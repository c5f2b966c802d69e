// The Dockerfile's structure (the image build itself is tests/image, label `image`): a build
// stage on debian:bookworm that runs scripts/setup.sh and make build (make test only with
// RUN_TESTS=1, default off); two slim stages on debian:bookworm-slim, `operator` and `runtime`
// (the last, so a plain `docker build` gives the runtime image), each with exactly its binary, the
// library packages scripts/lib-packages.sh listed for it (checked again after the install), a
// non-root user, its ENTRYPOINT and OCI labels; every COPY source exists in the repository (and
// is not .dockerignored) or is made by the stage it is copied from.
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
const byName = (name) => stages.find((s) => s.name === name)
const build = stages[0]
// RUN commands, runs of spaces (from joined continuation lines) made one.
const runs = (stage) => stage.steps.filter((s) => s.op === 'RUN').map((s) => s.args.replace(/\s+/g, ' '))
const IMAGES = [
  {stage: 'runtime', bin: 'kubetrain', dir: 'runtime'},
  {stage: 'operator', bin: 'kubetrain-operator', dir: 'operator'},
]
const cmakeVersion = readFileSync(join(ROOT, 'CMakeLists.txt'), 'utf8').match(/^project\(kubetrain VERSION ([\d.]+)/m)[1]

test('three stages: build on debian:bookworm; operator and runtime (last: the default target) on debian:bookworm-slim', () => {
  assert.deepEqual(stages.map((s) => s.name), ['build', 'operator', 'runtime'])
  assert.equal(resolve(build.from), 'debian:bookworm')
  for (const name of ['operator', 'runtime']) assert.equal(resolve(byName(name).from), 'debian:bookworm-slim', name)
  // The CUDA variant swaps the bases.
  assert.match(build.from, /\$\{?BASE_IMAGE/)
  for (const name of ['operator', 'runtime']) assert.match(byName(name).from, /\$\{?RUNTIME_IMAGE/)
})

test('the build stage: scripts/setup.sh, make build with a ccache cache mount, make test only when asked', () => {
  const r = runs(build)
  const setup = r.find((x) => x.includes('scripts/setup.sh'))
  assert.ok(setup, 'scripts/setup.sh')
  assert.match(setup, /RUN_TESTS[\s\S]*bash scripts\/setup\.sh[\s\S]*bash scripts\/setup\.sh --build-only/)
  const make = r.find((x) => /\bmake build\b/.test(x))
  assert.ok(make, 'make build')
  assert.match(make, /^--mount=type=cache,target=\/root\/\.cache\/ccache\b/, 'ccache in a cache mount')
  assert.equal(build.steps.find((s) => s.op === 'ENV' && /CCACHE_DIR=/.test(s.args))?.args.match(/CCACHE_DIR=(\S+)/)[1],
    '/root/.cache/ccache')
  // The tests run only with RUN_TESTS=1 (default 0); without them they are not even compiled.
  assert.equal(build.args.RUN_TESTS, '0', 'ARG RUN_TESTS=0: `docker build` runs no tests unless asked')
  assert.match(make, /if \[ "\$\{RUN_TESTS\}" = "1" \]; then make build [^;]*&& make test; else make build SETUP_ARGS=--build-only CMAKE_FLAGS="-DKUBETRAIN_BUILD_TESTS=OFF -DKUBETRAIN_BUILD_BENCH=OFF/)
  assert.match(readFileSync(join(ROOT, 'Makefile'), 'utf8'), /^\t@bash scripts\/setup\.sh \$\(SETUP_ARGS\)$/m)
  // No package manager calls of its own: setup.sh is the one list.
  assert.ok(!r.some((x) => /apt-get|npm /.test(x)), 'the build stage installs through scripts/setup.sh only')
  // Each image's library packages, listed by scripts/lib-packages.sh (fails naming a library it cannot place).
  const list = r.find((x) => x.includes('lib-packages.sh'))
  for (const {stage, bin} of IMAGES) {
    assert.match(list, new RegExp(`scripts/lib-packages\\.sh /out/bin/${bin} > /out/${stage}/packages\\.txt`), stage)
    assert.match(list, new RegExp(`cp scripts/lib-packages\\.sh /out/${stage}/`), stage)
  }
})

for (const {stage: name, bin} of IMAGES) {
  test(`the ${name} stage: ${bin} alone, its library packages checked, non-root, ENTRYPOINT ${bin}, OCI labels`, () => {
    const stage = byName(name)
    const copies = stage.steps.filter((s) => s.op === 'COPY').map((s) => s.args)
    const binaries = copies.filter((c) => c.startsWith('--from=build /out/bin/'))
    assert.deepEqual(binaries, [`--from=build /out/bin/${bin} /usr/local/bin/${bin}`])
    assert.ok(copies.includes(`--from=build /out/${name}/ /tmp/packages/`), 'the package list and lib-packages.sh')
    const r = runs(stage)
    const install = r.find((x) => x.includes('apt-get install'))
    assert.match(install, /\/tmp\/packages\/packages\.txt/)
    assert.match(install, /--no-install-recommends ca-certificates /)
    assert.match(install, /rm -rf \/var\/lib\/apt\/lists\/\*/)
    if (name === 'runtime') assert.match(install, /dataset-fashion-mnist/)
    else assert.doesNotMatch(install, /dataset-fashion-mnist/, 'the operator image needs no dataset')
    // After the binary is in, its libraries are checked against what was installed.
    const copyAt = stage.steps.findIndex((s) => s.op === 'COPY' && s.args.includes(`/usr/local/bin/${bin}`))
    const checkAt = stage.steps.findIndex((s) => s.op === 'RUN' &&
      s.args.startsWith(`bash /tmp/packages/lib-packages.sh --check /tmp/packages/packages.txt /usr/local/bin/${bin}`))
    assert.ok(checkAt > copyAt && copyAt > 0, 'lib-packages.sh --check runs on the binary after it is copied in')
    // The non-root user the chart and the examples expect.
    const users = stage.steps.filter((s) => s.op === 'USER')
    assert.equal(users.length, 1)
    assert.equal(users[0].args, '65532:65532')
    assert.ok(stage.steps.findIndex((s) => s.op === 'USER') > stage.steps.findLastIndex((s) => s.op === 'RUN'), 'USER after the last RUN')
    assert.match(install, /groupadd --gid 65532 kubetrain/)
    assert.match(install, /useradd --uid 65532 --gid 65532 /)
    const entry = stage.steps.filter((s) => s.op === 'ENTRYPOINT')
    assert.equal(entry.length, 1)
    assert.deepEqual(JSON.parse(entry[0].args), [`/usr/local/bin/${bin}`])
    const labels = stage.steps.filter((s) => s.op === 'LABEL').map((s) => s.args).join(' ')
    assert.match(labels, new RegExp(`org\\.opencontainers\\.image\\.title="${bin}"`))
    assert.match(labels, /org\.opencontainers\.image\.description="[^"]+"/)
    assert.match(labels, /org\.opencontainers\.image\.version="\$\{VERSION\}"/)
    assert.ok(stage.steps.some((s) => s.op === 'ARG' && s.args === 'VERSION'), 'ARG VERSION in the stage')
  })
}

test('the runtime image ships the runtime default data directory', () => {
  const dataDir = readFileSync(join(ROOT, 'runtime/train/train_options.h'), 'utf8').match(/data_dir = "([^"]+)"/)[1]
  assert.equal(dataDir, '/usr/share/datasets/fashion-mnist', 'dataset-fashion-mnist installs here')
})

test('one version: CMakeLists.txt project VERSION is the Dockerfile default, scripts/image.sh tags and the binaries print it', () => {
  assert.equal(globalArgs.VERSION, cmakeVersion)
  const image = readFileSync(join(ROOT, 'scripts/image.sh'), 'utf8')
  assert.match(image, /sed -n 's\/\^project\(kubetrain VERSION/)
  assert.match(image, /--build-arg "VERSION=\$VERSION"/)
  assert.match(image, /name=kubetrain; \[ "\$target" = operator \] && name=kubetrain-operator/)
  assert.match(image, /-t "\$name:\$VERSION"/)
  assert.match(readFileSync(join(ROOT, 'runtime/main.cc'), 'utf8'), new RegExp(`"kubetrain ${cmakeVersion.replace(/\./g, '\\.')}"`))
  assert.match(readFileSync(join(ROOT, 'operator/operator_options.cc'), 'utf8'),
    new RegExp(`"kubetrain-operator ${cmakeVersion.replace(/\./g, '\\.')}"`))
  assert.match(readFileSync(join(ROOT, 'Makefile'), 'utf8'), /^image:\n\t@bash scripts\/image\.sh \$\(IMAGE_ARGS\)$/m)
})

test('the chart runs the operator as the image user, with the image entrypoint if it names a command', () => {
  const dep = readFileSync(join(ROOT, 'charts/kubetrain/templates/deployment.yaml'), 'utf8')
  assert.match(dep, /runAsUser: 65532\b/)
  const command = dep.match(/command: \[([^\]]*)\]/)
  if (command) assert.equal(command[1].trim(), '/usr/local/bin/kubetrain-operator')
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
// directory or name is set; the build stage copies both from there.
test('the binaries the build stage copies are CMake targets `make build` builds', () => {
  assert.match(readFileSync(join(ROOT, 'Makefile'), 'utf8'), /^BUILD_DIR \?= build$/m)
  const cp = runs(build).find((r) => r.includes('/out/bin/'))
  for (const {dir, bin} of IMAGES) {
    assert.match(cp, new RegExp(`\\bbuild/${dir}/${bin}\\b`), `the build stage copies build/${dir}/${bin}`)
    assert.match(cp, new RegExp(`\\bstrip\\b[^&]*/out/bin/${bin}\\b`), `the build stage strips ${bin}`)
    const cmake = readFileSync(join(ROOT, dir, 'CMakeLists.txt'), 'utf8')
    const add = cmake.match(new RegExp(`add_executable\\(${bin}\\b[^)]*\\)`))
    assert.ok(add, `${dir}/CMakeLists.txt: no add_executable(${bin})`)
    assert.ok(!/EXCLUDE_FROM_ALL/.test(add[0]), `${bin} is EXCLUDE_FROM_ALL: make build would not build it`)
    assert.ok(!new RegExp(`set_target_properties\\(${bin}\\b[^)]*(OUTPUT_DIRECTORY|OUTPUT_NAME)`).test(cmake),
      `${bin}: an output directory or name moves it away from build/${dir}/${bin}`)
  }
  const cmakeFiles = ['CMakeLists.txt', ...readdirSync(join(ROOT, 'cmake')).filter((f) => f.endsWith('.cmake')).map((f) => `cmake/${f}`)]
  for (const f of cmakeFiles) {
    assert.ok(!/CMAKE_RUNTIME_OUTPUT_DIRECTORY/.test(readFileSync(join(ROOT, f), 'utf8')), `${f} sets CMAKE_RUNTIME_OUTPUT_DIRECTORY`)
  }
})
