#!/usr/bin/env bash
# free_port.sh [N]: prints N (default 1) distinct TCP ports that nothing on 127.0.0.1 listens on now,
# drawn at random below the kernel's ephemeral range (net.ipv4.ip_local_port_range), so that no
# outgoing connection of a test running alongside takes one before the server binds it. Used by the
# scripts that start radosgw, s3rver and Ceph monitors on ports of their own.
exec /usr/bin/python3 - "${1:-1}" <<'PY'
import random, socket, sys
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
got = []
while len(got) < int(sys.argv[1]):
    p = random.randrange(20000, max(low, 20001))
    if p in got:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        got.append(p)
    except OSError:
        pass
    finally:
        s.close()
print(" ".join(map(str, got)))
PY
