#!/usr/bin/env python3
"""Directory dependencies go one way: no component includes one above it or
beside it, and no two components include each other (docs/design.md,
"Layout"). A component is a top folder, or its second level under runtime/,
operator/ and tools/. The rules:
  - base/ and proto/ are the bottom; api/ may include only them;
  - runtime/ and operator/ are stacks of layers (LAYERS): a component includes
    its own stack's lower layers, base/, proto/ and api/, and nothing of the
    other stack;
  - tools/ (programs) include any library, never tests/;
  - testing/ (the emulator and test targets) includes any library; tests/,
    bench/ and tools/ include it;
  - tests/ and bench/ include any library; only tests/ includes tests/.
An edge that has to break a rule for a while is listed in KNOWN with what
would remove it (none today: issue 27 removed the last): the test fails on any
other such edge, and on a KNOWN one that has gone (take it off the list, so
that it cannot come back unnoticed). It prints the count of upward edges.

  include_direction_test.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys

LAYERS = {
    'runtime': ['runtime/tensor runtime/data runtime/metrics runtime/launcher',
                'runtime/nn runtime/optim', 'runtime/exchange', 'runtime/train runtime/plan', 'runtime'],
    'operator': ['operator/kube', 'operator/controller operator/webhook', 'operator/metrics', 'operator'],
}
BOTTOM = {'base': 0, 'proto': 0, 'api': 1}

# (from, to): why it is there and what removes it.
KNOWN = {}


def component(path):
    parts = path.split('/')
    if parts[0] in ('runtime', 'operator', 'tools') and len(parts) > 2:
        return '/'.join(parts[:2])
    return parts[0]


def rank(comp):
    """(stack, layer) of a component; stack None for the bottom."""
    if comp in BOTTOM:
        return (None, BOTTOM[comp])
    for stack, layers in LAYERS.items():
        for i, names in enumerate(layers):
            if comp in names.split():
                return (stack, i)
    return (comp.split('/')[0], None)  # tools/*, tests, bench


def allowed(a, b):
    ra, rb = rank(a), rank(b)
    if b in ('tests', 'bench'):
        return a == b
    if b == 'testing':  # the testing library: for tests, benchmarks and tools
        return a in ('tests', 'bench', 'testing') or a.startswith('tools/')
    if a == 'testing':
        return not b.startswith('tools/')
    if a in ('tests', 'bench'):
        return True
    if rb[0] is None:  # the bottom
        return ra[0] is not None or rb[1] < ra[1]
    if ra[0] is None:  # the bottom including a stack
        return False
    if a.startswith('tools/'):
        return not b.startswith('tools/')
    if ra[0] != rb[0]:
        return False
    return rb[1] < ra[1]


def main():
    root = sys.argv[1]
    os.chdir(root)
    files = subprocess.check_output(['git', 'ls-files', '*.cc', '*.h', '*.cu', '*.cuh'],
                                    text=True).split()
    include = re.compile(r'\s*#\s*include\s+"([^"]+)"')
    edges = {}
    for f in files:
        a = component(f)
        with open(f, errors='replace') as src:
            for line in src:
                m = include.match(line)
                if not m:
                    continue
                target = m.group(1)
                if not os.path.exists(target):
                    continue  # a system or generated header
                b = component(target)
                if a != b:
                    edges.setdefault((a, b), (f, target))
    bad = {e: w for e, w in edges.items() if not allowed(*e)}
    failures = []
    for (a, b), (f, t) in sorted(bad.items()):
        if (a, b) not in KNOWN:
            failures.append(f'new: {a} -> {b} ({f} includes {t})')
    for (a, b), why in sorted(KNOWN.items()):
        if (a, b) not in bad:
            failures.append(f'gone: {a} -> {b} no longer exists: take it off KNOWN ({why})')
    # Cycles among components, whatever the rules say.
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    cycles = [(a, b) for (a, b) in edges if a < b and (b, a) in edges]
    for a, b in cycles:
        if (a, b) not in KNOWN and (b, a) not in KNOWN:
            failures.append(f'cycle: {a} <-> {b}')
    print(f'{len(edges)} directory edges, {len(bad)} against the layering '
          f'({len(KNOWN)} known, issue 27), {len(cycles)} two-way')
    for (a, b), (f, t) in sorted(bad.items()):
        print(f'  {a} -> {b}: {f} includes {t}' + ('' if (a, b) not in KNOWN else f'  [{KNOWN[(a, b)]}]'))
    for line in failures:
        print('FAIL: ' + line)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
