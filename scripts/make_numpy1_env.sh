#!/usr/bin/env bash
# A second Python environment with another numpy major version (1.x) than .venv's (2.x), for
# the test that a model served from its own environment gives the in-process rows
# (tests/serving/test_other_environment.py). It has its own numpy; everything else (torch,
# IntraBench, MobileSAM's weights) comes from .venv, after its own packages on the path.
# Idempotent; run after scripts/install.sh. The environment: .venv-numpy1/.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv-numpy1/bin/python ]; then
  "$PYTHON" -m venv .venv-numpy1
fi
PIP_DISABLE_PIP_VERSION_CHECK=1 .venv-numpy1/bin/pip install -q "numpy>=1.26,<2"
host=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
own=$(.venv-numpy1/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# addsitedir reads .venv's own .pth files (the editable install of IntraBench) and appends
# .venv's packages after this environment's: its numpy 1.x comes first
echo "import site; site.addsitedir('$host')" > "$own/zz_host_packages.pth"
.venv-numpy1/bin/python -c "import numpy, intrabench; assert numpy.__version__.startswith('1.'), numpy.__version__; print('second environment: numpy', numpy.__version__)"
