#!/bin/bash
# CTest fixture (FIXTURES_CLEANUP e2e_cluster): stops what cluster_up.sh started.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
E2E_STATE=${E2E_STATE:-/tmp/kubetrain-e2e}
export WIPE=1
"$ROOT/scripts/local-cluster.sh" down "$E2E_STATE"
leftover=$(ip netns list 2>/dev/null | grep -c "^kt-" || true)
[ "$leftover" = 0 ] || { echo "FAIL: $leftover network namespaces left behind"; exit 1; }
