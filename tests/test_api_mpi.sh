#!/usr/bin/env bash
# test_api_mpi (a program that initialises MPI itself, then opens a cltrain
# context) under mpirun -np 2. Skipped (77) without mpirun, except under CI.
#   test_api_mpi.sh TEST_API_MPI
set -u
if ! command -v mpirun >/dev/null; then
  if [ -n "${CI:-}" ]; then echo "FAIL: mpirun missing"; exit 1; fi
  echo "skipped: mpirun missing (apt-get install openmpi-bin)"
  exit 77
fi
MPI=(mpirun --oversubscribe --bind-to none -np 2)
[ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)
POCL_DEVICES=pthread "${MPI[@]}" "$1"
