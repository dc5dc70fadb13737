#!/bin/bash
# A challenge submission's entry point (the tests' own): the real work is in cvpr25_predict.py
exec "${PYTHON:-python3}" "$(dirname "$0")/cvpr25_predict.py"
