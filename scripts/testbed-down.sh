#!/usr/bin/env bash
# Takes the demo devnet down: containers, network and volumes (images are kept).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEVPROF_DEMO_IMAGE="${DEVPROF_DEMO_IMAGE:-devprof-demo-node:latest}"

echo "testbed-down: docker-compose -p devprof-demo down -v --remove-orphans"
docker-compose -f compose/demo.yml -p devprof-demo down -v --remove-orphans
