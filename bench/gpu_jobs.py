#!/usr/bin/env python3
"""Training job throughput against one process, same run, same device.

Trains the same model with kubetrain on the same device as one process and
as TrainingJobs of several processes started by `kubetrain run` on loopback,
one after the other, and prints how the job's samples/s compares with the
one process's, and whether the share of each step spent in the exchange grows
over a run. Jobs (--jobs, comma-separated, run in that order, `one` first):

  one    `kubetrain train --model M --device D --batch-size B --epochs E
         --metrics-port 0`: one process, no exchange between processes
  arN    a TrainingJob of N Worker replicas and no PS: allreduce (ar1, ar2)
  psN    a TrainingJob of 1 PS replica and N Workers, --exchange-mode sync
         (ps1, ps2)

Every replica runs `--kubetrain` with the same `train` arguments (the YAML's
container `command` names the binary, so the replicas run it as given; the
`image` is required by the spec but unused locally), with `--metrics-port 0`,
--data and --extra-args. On cuda each process trains on one GPU (`--gpus 1`,
the first visible one, unless --extra-args names --gpus), so every job shares
that one device; allreduce jobs leave the backend to `auto`, which gives ranks
sharing a GPU the TCP ring (GPU buckets staged through pinned memory) and a
world of one no collective at all (--extra-args may name
--allreduce-backend).

Output: `#` lines (the settings, the column header and, at the end, every
job's command line: `kubetrain run` of a YAML in a temporary directory that
is removed at the end, followed by the command line of each replica type),
and one row per job:

  # job workers samples_s ratio_vs_one exchange_first exchange_last test_acc

  job             the --jobs name
  workers         training processes (Worker replicas; 1 for `one`)
  samples_s       the sum over the workers of each one's `final ...
                  samples/s=` (kubetrain's own end-of-run figure, which counts
                  its evaluations: add --extra-args '--eval-every-epoch false'
                  to leave out all but the last); the median over --repeat runs
  ratio_vs_one    samples_s / the samples_s of `one` (`-` without `one`)
  exchange_first  the `exchange=` share of worker 0's first `progress` line
  exchange_last   the same of its last `progress` line (`-` without any: see
                  --log-every in --extra-args)
  test_acc        the `final test_accuracy=` of the worker that evaluated
                  (worker 0), `-` where none was printed

Numeric columns are medians over --repeat runs; the runs go round the jobs
--repeat times. A job that fails (a non-zero exit, a missing final line, a
--timeout: every run is killed with its replicas after --timeout seconds)
stops the script with exit 1 and its last 20 log lines on stderr.

On cuda without a usable GPU (`kubetrain devices` lists no `cuda:` device) it
prints `skipped: <reason>` and exits 0. --device cpu checks the plumbing.
"""
import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile

JOB_RE = re.compile(r"^(one|ar[1-9][0-9]*|ps[1-9][0-9]*)$")
LINE_RE = re.compile(r"^\[(?P<replica>[^\]]+)\] (?P<line>.*)$")
WORKER_RE = re.compile(r"-worker-(?P<index>[0-9]+)$")
KEY_RE = r"(?:^|\s){}=(?P<v>[0-9.eE+-]+)(?:\s|$)"
TAIL_LINES = 20


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kubetrain", required=True, help="path of the kubetrain binary")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--model", default="cnn", choices=["mlp", "cnn"])
    p.add_argument("--batch-size", type=int, default=64, help="per worker (default 64)")
    p.add_argument("--epochs", type=int, default=3, help="default 3")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                   help="Fashion-MNIST IDX directory")
    p.add_argument("--jobs", default="one,ar1,ar2,ps1,ps2",
                   help="comma-separated: one, arN (N allreduce workers), psN (1 PS, N workers)")
    p.add_argument("--repeat", type=int, default=1, help="runs of each job; report the median")
    p.add_argument("--extra-args", default="",
                   help="more arguments for every `kubetrain train` (one string, shell-quoted; "
                        "write --extra-args=--tf32 for a single flag)")
    p.add_argument("--timeout", type=float, default=1800,
                   help="seconds one run may take (default 1800)")
    a = p.parse_args(argv)
    a.jobs = [j for j in a.jobs.split(",") if j]
    if not a.jobs:
        p.error("--jobs is empty")
    for j in a.jobs:
        if not JOB_RE.match(j):
            p.error(f"unknown job '{j}' (one, arN, psN: e.g. ar2, ps1)")
    if len(set(a.jobs)) != len(a.jobs):
        p.error(f"--jobs names a job twice: {','.join(a.jobs)}")
    if "one" in a.jobs:  # first: the other rows' ratio_vs_one needs it
        a.jobs.remove("one")
        a.jobs.insert(0, "one")
    if a.batch_size <= 0 or a.epochs <= 0:
        p.error("--batch-size and --epochs must be positive")
    if a.repeat <= 0:
        p.error("--repeat must be positive")
    if a.timeout <= 0:
        p.error("--timeout must be positive")
    try:
        a.extra = shlex.split(a.extra_args)
    except ValueError as e:
        p.error(f"--extra-args: {e}")
    if not os.access(a.kubetrain, os.X_OK):
        p.error(f"--kubetrain {a.kubetrain} is not an executable")
    a.kubetrain = os.path.abspath(a.kubetrain)
    return a


def names_flag(args, flag):
    return any(x == flag or x.startswith(flag + "=") for x in args)


def train_args(a, job):
    """The `train` arguments of every replica of `job`."""
    args = ["train", "--model", a.model, "--device", a.device, "--batch-size", str(a.batch_size),
            "--epochs", str(a.epochs), "--metrics-port", "0", "--data", a.data]
    if a.device == "cuda" and not names_flag(a.extra, "--gpus"):
        args += ["--gpus", "1"]
    if job.startswith("ps"):
        args += ["--exchange-mode", "sync"]
    return args + a.extra


def job_yaml(a, job, args):
    """A TrainingJob for `job` (arN, psN): every replica runs --kubetrain with `args`."""
    workers = int(job[2:])
    replicas = [("Worker", workers)]
    if job.startswith("ps"):
        replicas.insert(0, ("PS", 1))
    q = lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'  # noqa: E731
    lines = ["apiVersion: kubetrain.io/v1alpha1", "kind: TrainingJob",
             f"metadata: {{name: gj-{job}}}", "spec:",
             "  successPolicy: AllWorkers",  # every worker's final line, then the job ends
             "  runPolicy: {backoffLimit: 0}", "  replicaSpecs:"]
    for kind, count in replicas:
        lines += [f"    {kind}:", f"      replicas: {count}", "      restartPolicy: Never",
                  "      template:", "        spec:", "          containers:",
                  "            - name: kubetrain",
                  "              image: kubetrain:unused-locally",
                  f"              command: [{q(a.kubetrain)}]",
                  f"              args: [{', '.join(q(x) for x in args)}]"]
    return "\n".join(lines) + "\n", workers, [kind for kind, _ in replicas]


def run_logged(cmd, timeout):
    """Runs cmd in its own process group; returns (exit code or None on a
    timeout, stdout and stderr lines interleaved as they came)."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True) as proc:
        try:
            out, _ = proc.communicate(timeout=timeout)
            return proc.returncode, out.splitlines()
        except subprocess.TimeoutExpired:
            return None, end_group(proc).splitlines()
        except BaseException:  # Ctrl-C: the group is in its own session, so end it here
            end_group(proc)
            raise


def end_group(proc):
    """Ends proc's process group (kubetrain run and its replicas); returns the
    output that was still to be read."""
    out = ""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            out, _ = proc.communicate(timeout=15)
            break
        except subprocess.TimeoutExpired:
            pass
    return out or ""


def value(line, key):
    m = re.search(KEY_RE.format(re.escape(key)), line)
    return float(m.group("v")) if m else None


def measure(lines, one_process):
    """(samples/s summed over the workers' final lines, workers with a final
    line, worker 0's first and last exchange shares, test accuracy)."""
    finals, progress0, acc = {}, [], None
    for raw in lines:
        if one_process:
            worker, line = 0, raw
        else:
            m = LINE_RE.match(raw)
            if not m:
                continue
            w = WORKER_RE.search(m.group("replica"))
            if not w:
                continue
            worker, line = int(w.group("index")), m.group("line")
        if line.startswith("{"):  # --log-format json: the text line is its "msg"
            try:
                line = str(json.loads(line).get("msg", ""))
            except (ValueError, AttributeError):
                continue
        if line.startswith("final "):
            rate = value(line, "samples/s")
            if rate is not None:
                finals[worker] = rate
            got = value(line, "test_accuracy")
            if got is not None and (acc is None or worker == 0):
                acc = got
        elif line.startswith("progress ") and worker == 0:
            share = value(line, "exchange")
            if share is not None:
                progress0.append(share)
    first = progress0[0] if progress0 else None
    last = progress0[-1] if progress0 else None
    return sum(finals.values()), len(finals), first, last, acc


class JobFailed(Exception):
    pass


def run_job(a, job, tmp):
    """Runs one job once; returns (workers, samples/s, exchange first, last,
    test accuracy) and its command lines."""
    args = train_args(a, job)
    if job == "one":
        cmd = [a.kubetrain] + args
        described = [" ".join(shlex.quote(x) for x in cmd)]
        workers = 1
    else:
        text, workers, kinds = job_yaml(a, job, args)
        path = os.path.join(tmp, f"{job}.yaml")
        with open(path, "w") as f:
            f.write(text)
        cmd = [a.kubetrain, "run", path]
        replica_cmd = " ".join(shlex.quote(x) for x in [a.kubetrain] + args)
        described = [" ".join(shlex.quote(x) for x in cmd)]
        for kind in kinds:
            count = 1 if kind == "PS" else workers
            described.append(f"  {kind} x{count}: {replica_cmd}")
    code, lines = run_logged(cmd, a.timeout)
    why = None
    if code is None:
        why = f"ran over --timeout {a.timeout:g}s"
    elif code != 0:
        why = f"exited with code {code}"
    else:
        rate, finished, first, last, acc = measure(lines, job == "one")
        if finished != workers:
            why = f"{finished} of {workers} workers printed a final samples/s line"
        elif rate <= 0:
            why = f"samples/s is {rate:g}"
    if why:
        raise JobFailed(f"job {job} {why}: {described[0]}", lines[-TAIL_LINES:])
    return (workers, rate, first, last, acc), described


def usable_gpu(a):
    """(True, "") when `kubetrain devices` lists a cuda: device, else (False, why)."""
    try:
        r = subprocess.run([a.kubetrain, "devices"], capture_output=True, text=True,
                           timeout=min(a.timeout, 300))
    except subprocess.TimeoutExpired:
        raise JobFailed("kubetrain devices ran over its timeout", [])
    if r.returncode != 0:
        raise JobFailed(f"kubetrain devices exited with code {r.returncode}",
                        (r.stdout + r.stderr).splitlines()[-TAIL_LINES:])
    lines = r.stdout.splitlines()
    if any(line.startswith("cuda:") for line in lines):
        return True, ""
    for line in lines:
        if line.startswith("# no GPU: "):
            return False, line[len("# no GPU: "):]
    return False, "kubetrain devices lists no cuda: device"


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main(argv):
    a = parse_args(argv)
    try:
        if a.device == "cuda":
            ok, why = usable_gpu(a)
            if not ok:
                print(f"skipped: {why}")
                return 0
        print(f"# device={a.device} model={a.model} batch={a.batch_size} epochs={a.epochs} "
              f"repeat={a.repeat} extra_args={shlex.join(a.extra) or '-'}")
        print("# job workers samples_s ratio_vs_one exchange_first exchange_last test_acc",
              flush=True)
        results = {j: [] for j in a.jobs}
        commands = {}
        one = None
        with tempfile.TemporaryDirectory(prefix="gpu_jobs.") as tmp:
            for r in range(a.repeat):
                for job in a.jobs:
                    print(f"gpu_jobs.py: {job} (run {r + 1} of {a.repeat})", file=sys.stderr,
                          flush=True)
                    result, commands[job] = run_job(a, job, tmp)
                    results[job].append(result)
                    if r + 1 < a.repeat:
                        continue
                    workers = result[0]
                    rate, first, last, acc = (median_or_none([x[i] for x in results[job]])
                                              for i in (1, 2, 3, 4))
                    if job == "one":
                        one = rate
                    ratio = rate / one if one else None
                    print(f"{job} {workers} {rate:.0f} {fmt(ratio, '.2f')} {fmt(first, '.2f')} "
                          f"{fmt(last, '.2f')} {fmt(acc, '.4f')}", flush=True)
        for job in a.jobs:
            print(f"# {job}: {commands[job][0]}")
            for extra in commands[job][1:]:
                print(f"# {extra}")
    except JobFailed as e:
        message, tail = e.args
        print(f"gpu_jobs.py: {message}", file=sys.stderr)
        if tail:
            print(f"gpu_jobs.py: its last {len(tail)} log lines:", file=sys.stderr)
            for line in tail:
                print(f"  {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
