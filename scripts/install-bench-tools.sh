#!/usr/bin/env bash
# Installs, from Debian's packages, the tools the benchmarks compare against and the report
# rendering script uses: GDAL (decode peer), rasterio + numpy (index peer, run with the system
# /usr/bin/python3), gcc (the C reference loop) and poppler-utils (pdftoppm, pdftotext).
# The service and its test suite need none of them.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
  gdal-bin python3-gdal python3-rasterio python3-numpy gcc poppler-utils
