#!/usr/bin/env python3
"""Measures one link's alpha (one-way latency per message) and B (payload
bytes per second, one direction) between two test hosts, as the cost model
(runtime/plan/cost_model.h) takes them: alpha from the median round trip of
small TCP messages, halved; B from a bulk transfer.

  link_probe.py serve PORT
  link_probe.py probe HOST PORT [--bytes N]   -> prints "alpha_us=... bytes_per_second=..."
"""
import socket
import statistics
import sys
import time


def serve(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('0.0.0.0', port))
    s.listen(1)
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # Ping-pong: echo single bytes until a 'b' starts the bulk phase.
    while True:
        b = c.recv(1)
        if not b:
            return
        if b == b'b':
            break
        c.sendall(b)
    want = int(c.recv(16).decode().strip())
    got = 0
    while got < want:
        chunk = c.recv(1 << 20)
        if not chunk:
            return
        got += len(chunk)
    c.sendall(b'k')
    c.close()


def probe(host, port, total):
    c = socket.socket()
    for _ in range(100):
        try:
            c.connect((host, port))
            break
        except OSError:
            time.sleep(0.05)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(300):
        t0 = time.perf_counter()
        c.sendall(b'p')
        c.recv(1)
        rtts.append(time.perf_counter() - t0)
    c.sendall(b'b' + str(total).encode().rjust(16))
    buf = b'\0' * (1 << 20)
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        n = min(len(buf), total - sent)
        c.sendall(buf[:n])
        sent += n
    c.recv(1)
    seconds = time.perf_counter() - t0
    alpha = statistics.median(rtts[50:]) / 2
    print('alpha_us=%.1f bytes_per_second=%.0f' % (alpha * 1e6, total / seconds))


if __name__ == '__main__':
    if len(sys.argv) >= 3 and sys.argv[1] == 'serve':
        serve(int(sys.argv[2]))
    elif len(sys.argv) >= 4 and sys.argv[1] == 'probe':
        total = 16 << 20
        if len(sys.argv) == 6 and sys.argv[4] == '--bytes':
            total = int(sys.argv[5])
        probe(sys.argv[2], int(sys.argv[3]), total)
    else:
        sys.exit(__doc__)
