#!/usr/bin/env python3
"""Training samples/s of kubetrain against PyTorch, same models, same run.

Trains the built-in `mlp` and `cnn` (runtime/nn/model_spec.cc) with kubetrain
(`kubetrain train --device DEVICE`) and the same architectures in PyTorch
(SGD, momentum 0.9, the same batch sizes) one after the other on the same
device, and prints a `#` header line, then one table row per (model, batch
size):

  model batch kubetrain_samples_s torch_samples_s ratio torch_graph_samples_s ratio_graph

  kubetrain_samples_s    kubetrain's figure: the median of its progress lines'
                         samples/s after the first (warm-up) line. kubetrain
                         runs as many epochs as --warmup + --steps steps of
                         the batch size need (Fashion-MNIST has 60000 training
                         samples: 220 steps of 1024 are 4 epochs), with
                         --train-limit trimming each epoch so that about that
                         many steps run, and a progress line every --steps/5
                         steps.
  torch_samples_s        PyTorch eager: zero_grad, forward, backward and
                         optimizer.step() each step; timed over --steps steps
                         after --warmup steps, with torch.cuda.synchronize()
                         around the timed region.
  ratio                  kubetrain_samples_s / torch_samples_s.
  torch_graph_samples_s  --device cuda only: the whole PyTorch training step
                         (forward, backward and the SGD-momentum update)
                         captured once in a CUDA graph (torch.cuda.graph) and
                         replayed, the inputs copied into the graph's static
                         tensors with copy_ before each replay; timed like the
                         eager column. `-` on the CPU, and where capture
                         failed (a `# torch graph failed` line says why).
  ratio_graph            kubetrain_samples_s / torch_graph_samples_s, or `-`.

The mlp is 784-256-128-10 with ReLU; the cnn is two 3x3 "same" convolutions
(32 and 64 filters) each with ReLU and 2x2 max pooling, then dense 128, ReLU,
dropout 0.25 and dense 10, as in runtime/nn/model_spec.cc. PyTorch's inputs
are random tensors already on the device; kubetrain reads Fashion-MNIST
(--data) and copies each batch to the device.

It needs PyTorch with a usable GPU for --device cuda: without one it prints
`skipped: <reason>` and exits 0 (a CPU-only machine cannot give the figure).
With --device cpu both sides run on the CPU (argument and plumbing checks);
without PyTorch there the torch columns are `-` and a `# torch skipped` line
says why.
"""
import argparse
import gzip
import inspect
import json
import os
import statistics
import subprocess
import sys
import time

# Fashion-MNIST's training split, when --data's labels file cannot be read
# (kubetrain then reports the missing files itself).
DEFAULT_TRAIN_SAMPLES = 60000
GRAPH_WARMUP_STEPS = 3  # eager steps on a side stream before capture (PyTorch's recipe)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kubetrain", required=True, help="path of the kubetrain binary")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn")
    p.add_argument("--batch-sizes", default="256", help="comma-separated batch sizes")
    p.add_argument("--steps", type=int, default=200, help="timed steps per measurement")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                   help="Fashion-MNIST IDX directory for kubetrain")
    p.add_argument("--tf32", action="store_true", help="TF32 GEMMs on both sides")
    p.add_argument("--timeout", type=float, default=1800,
                   help="seconds one kubetrain run may take (default 1800)")
    a = p.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    for m in a.models:
        if m not in ("mlp", "cnn"):
            p.error(f"unknown model '{m}' (mlp, cnn)")
    try:
        a.batch_sizes = [int(b) for b in a.batch_sizes.split(",") if b]
    except ValueError:
        p.error(f"--batch-sizes must be integers, got '{a.batch_sizes}'")
    if not a.batch_sizes or min(a.batch_sizes) <= 0:
        p.error("--batch-sizes must be positive")
    if a.steps <= 0 or a.warmup < 0:
        p.error("--steps must be > 0 and --warmup >= 0")
    if a.timeout <= 0:
        p.error("--timeout must be positive")
    if not os.access(a.kubetrain, os.X_OK):
        p.error(f"--kubetrain {a.kubetrain} is not an executable")
    return a


def train_samples(data_dir):
    """The number of training samples in data_dir (its IDX labels header)."""
    for name in ("train-labels-idx1-ubyte", "train-labels-idx1-ubyte.gz"):
        path = os.path.join(data_dir, name)
        if not os.path.isfile(path):
            continue
        try:
            with (gzip.open if name.endswith(".gz") else open)(path, "rb") as f:
                head = f.read(8)
        except OSError:
            break
        if len(head) == 8 and head[:4] == b"\x00\x00\x08\x01" and head[4:] != b"\0\0\0\0":
            return int.from_bytes(head[4:], "big")
        break
    return DEFAULT_TRAIN_SAMPLES


def kubetrain_schedule(steps, batch, samples):
    """(--epochs, --train-limit) so that kubetrain runs at least `steps` steps of
    `batch` over a training split of `samples`: as many epochs as the steps
    need, each trimmed to about steps/epochs steps."""
    epochs = max(1, -(-steps * batch // samples))
    per_epoch = -(-steps // epochs)
    return epochs, min(per_epoch * batch, samples)


def kubetrain_samples_per_second(a, model, batch):
    log_every = max(1, a.steps // 5)
    epochs, limit = kubetrain_schedule(a.warmup + a.steps, batch, train_samples(a.data))
    cmd = [a.kubetrain, "train", "--model", model, "--device", a.device, "--data", a.data,
           "--batch-size", str(batch), "--epochs", str(epochs), "--train-limit", str(limit),
           "--log-every", str(log_every), "--log-format", "json", "--metrics-port", "0",
           "--eval-every-epoch", "false", "--lr", "0.01"]
    if a.tf32:
        cmd.append("--tf32")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"kubetrain ran over --timeout {a.timeout:g}s: {' '.join(cmd)}")
    if r.returncode != 0:
        raise RuntimeError(f"kubetrain failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    rates = []
    for line in r.stdout.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if isinstance(j, dict) and j.get("kind") == "progress" and "samples/s" in j:
            rates.append(float(j["samples/s"]))
    if len(rates) < 2:
        raise RuntimeError(f"kubetrain printed {len(rates)} progress lines; need 2+ "
                           f"({' '.join(cmd)})")
    return statistics.median(rates[1:])


def torch_model(torch, model):
    nn = torch.nn
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                             nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
                         nn.Linear(128, 10))


def torch_optimizer(torch, params, graph):
    """SGD with momentum 0.9; capturable=True for a CUDA graph where this
    PyTorch's SGD has the argument (SGD keeps no step count on the host, so it
    captures without it elsewhere)."""
    kwargs = {}
    if graph and "capturable" in inspect.signature(torch.optim.SGD).parameters:
        kwargs["capturable"] = True
    return torch.optim.SGD(params, lr=0.01, momentum=0.9, **kwargs)


def torch_inputs(torch, dev, batch):
    return (torch.rand(batch, 1, 28, 28, device=dev),
            torch.randint(0, 10, (batch,), device=dev))


def timed_samples_per_second(torch, a, step, batch, warmup):
    for _ in range(warmup):
        step()
    if a.device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    if a.device == "cuda":
        torch.cuda.synchronize()
    return a.steps * batch / (time.perf_counter() - t0)


def torch_samples_per_second(torch, a, model, batch):
    dev = torch.device(a.device)
    net = torch_model(torch, model).to(dev)
    opt = torch_optimizer(torch, net.parameters(), graph=False)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch_inputs(torch, dev, batch)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        opt.step()

    return timed_samples_per_second(torch, a, step, batch, a.warmup)


def torch_graph_samples_per_second(torch, a, model, batch):
    """The training step captured once in a CUDA graph and replayed (PyTorch's
    "whole network capture" recipe)."""
    dev = torch.device("cuda")
    net = torch_model(torch, model).to(dev)
    opt = torch_optimizer(torch, net.parameters(), graph=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch_inputs(torch, dev, batch)  # each step's batch, copied into the static inputs
    static_x, static_y = x.clone(), y.clone()

    # Warm up on a side stream (the momentum buffers and the allocator's
    # pools exist before capture), then capture one whole step.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(GRAPH_WARMUP_STEPS):
            opt.zero_grad(set_to_none=True)
            loss_fn(net(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = loss_fn(net(static_x), static_y)
        static_loss.backward()
        opt.step()

    def step():
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()

    return timed_samples_per_second(torch, a, step, batch, a.warmup)


def main(argv):
    a = parse_args(argv)
    torch, why = None, ""
    try:
        import torch  # noqa: PLC0415 (optional: present on the GPU machine)
    except ImportError as e:
        why = f"PyTorch is not installed ({e})"
    if torch is not None and a.device == "cuda" and not torch.cuda.is_available():
        torch, why = None, "PyTorch sees no usable GPU (torch.cuda.is_available() is False)"
    if torch is None and a.device == "cuda":
        print(f"skipped: {why}")
        return 0
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
    version = torch.__version__ if torch is not None else "-"
    print(f"# device={a.device} torch={version} steps={a.steps} warmup={a.warmup} "
          f"tf32={'on' if a.tf32 else 'off'}")
    if torch is None:
        print(f"# torch skipped: {why}")
    elif a.device != "cuda":
        print("# torch graph: CUDA graphs need --device cuda")
    print("model batch kubetrain_samples_s torch_samples_s ratio torch_graph_samples_s "
          "ratio_graph")
    for model in a.models:
        for batch in a.batch_sizes:
            try:
                kt = kubetrain_samples_per_second(a, model, batch)
            except RuntimeError as e:
                print(f"gpu_vs_pytorch.py: {model} batch {batch}: {e}", file=sys.stderr)
                return 1
            if torch is None:
                print(f"{model} {batch} {kt:.0f} - - - -", flush=True)
                continue
            pt = torch_samples_per_second(torch, a, model, batch)
            graph, graph_ratio = "-", "-"
            if a.device == "cuda":
                try:
                    pg = torch_graph_samples_per_second(torch, a, model, batch)
                    graph, graph_ratio = f"{pg:.0f}", f"{kt / pg:.2f}"
                except RuntimeError as e:
                    reason = " ".join(str(e).split())[:300]
                    print(f"# torch graph failed for {model} batch {batch}: {reason}")
            print(f"{model} {batch} {kt:.0f} {pt:.0f} {kt / pt:.2f} {graph} {graph_ratio}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
