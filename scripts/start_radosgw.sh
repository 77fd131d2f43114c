#!/usr/bin/env bash
# Starts a real S3 server for the peers tier: a one-monitor, one-memstore-OSD Ceph cluster and a
# radosgw on 127.0.0.1 (../shared/PEERS.md), under DIR, with one user. Prints the environment a client
# needs (eval it): AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ANNEAL_S3_ENDPOINT, RADOSGW_DIR.
# Stop with: scripts/start_radosgw.sh --stop DIR
# Usage: scripts/start_radosgw.sh DIR [RGW_PORT] [MON_PORT]
# The OSD keeps objects in RAM, RADOSGW_MEMSTORE_MB (2048) at most; a deleted object's space comes back
# only at radosgw's garbage collection, hours later, so size it for everything a run writes.
set -euo pipefail
if [ "${1:-}" = --stop ]; then
  D=$2
  # The gateway, then the OSD, then the monitor: an OSD whose monitor is gone takes ~5 s to exit.
  for daemon in radosgw ceph-osd ceph-mon; do
    pat="$daemon -c $D/ceph.conf"
    pkill -f "$pat" 2>/dev/null || true
    for _ in $(seq 1 50); do pgrep -f "$pat" >/dev/null || break; sleep 0.1; done
    pkill -9 -f "$pat" 2>/dev/null || true
  done
  exit 0
fi
D=$(readlink -f "${1:?usage: start_radosgw.sh DIR [RGW_PORT] [MON_PORT]}")
RGW_PORT=${2:-17480}
MON_PORT=${3:-16789}
for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph; do
  command -v $b >/dev/null || { echo "start_radosgw: $b is missing: run scripts/setup.sh" >&2; exit 2; }
done
rm -rf "$D" && mkdir -p "$D"/run "$D"/log "$D"/mon "$D"/osd "$D"/rgw
FSID=$(cat /proc/sys/kernel/random/uuid)
cat >"$D/ceph.conf" <<CONF
[global]
fsid = $FSID
mon host = v2:127.0.0.1:$MON_PORT
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd objectstore = memstore
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
run dir = $D/run
pid file = $D/run/\$name.pid
log file = $D/log/\$name.log
admin socket = $D/run/\$name.asok
mon data = $D/mon/\$cluster-\$id
osd data = $D/osd/\$cluster-\$id
memstore device bytes = $((${RADOSGW_MEMSTORE_MB:-2048} * 1048576))
# Without these radosgw loops on "get_initial_auth_request returned -13" (PEERS.md).
ms mon client mode = crc secure
ms client mode = crc secure
ms mon cluster mode = crc secure
ms cluster mode = crc secure
ms service mode = crc secure
ms mon service mode = crc secure
CONF
C="-c $D/ceph.conf"
monmaptool --create --add a "v2:127.0.0.1:$MON_PORT" --fsid "$FSID" "$D/monmap" >/dev/null
ceph-mon $C --mkfs -i a --monmap "$D/monmap"
ceph-mon $C -i a
ID=$(timeout 30 ceph $C osd create)
mkdir -p "$D/osd/ceph-$ID"
ceph-osd $C -i "$ID" --mkfs >/dev/null 2>&1
ceph-osd $C -i "$ID" 2>>"$D/log/osd-start.err"
radosgw $C -n client.rgw --rgw-frontends "beast endpoint=127.0.0.1:$RGW_PORT" --rgw-data "$D/rgw" --rgw-dns-name localhost >"$D/log/rgw.out" 2>&1
up=0
for _ in $(seq 1 120); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RGW_PORT/")" != 000 ] && { up=1; break; }
  sleep 0.5
done
if [ $up = 0 ]; then
  echo "start_radosgw: the gateway never answered on 127.0.0.1:$RGW_PORT within 60 s; its log:" >&2
  tail -5 "$D/log/rgw.out" "$D/log/client.rgw.log" >&2 2>/dev/null || true
  exit 3
fi
KEY=ANNEAL$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F)
SECRET=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
radosgw-admin $C user create --uid=anneal --display-name=anneal --access-key="$KEY" --secret-key="$SECRET" >"$D/log/user.out" 2>&1 ||
  { echo "start_radosgw: creating the S3 user failed:" >&2; tail -5 "$D/log/user.out" >&2; exit 3; }
echo "export AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=$SECRET ANNEAL_S3_ENDPOINT=http://127.0.0.1:$RGW_PORT RADOSGW_DIR=$D"
