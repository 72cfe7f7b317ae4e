#!/usr/bin/env bash
# Azurite (the Azure Storage emulator) for tests/test_storage_azure.py, pinned by
# tests/azurite/package-lock.json and installed into tests/azurite/node_modules. The test's
# fixture runs this itself when npm is present and the emulator is not installed yet.
set -euo pipefail
cd "$(dirname "$0")/../tests/azurite"
if [ -x node_modules/.bin/azurite-blob ]; then exit 0; fi
if ! command -v npm >/dev/null; then
  echo "azurite: npm is not installed (apt-get install nodejs npm); the Azure Blob tests will skip" >&2
  exit 1
fi
# --ignore-scripts: azurite needs none of its dependencies' install scripts to serve blobs.
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
