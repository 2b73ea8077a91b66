# Two OpenCL vendors on any machine: a private vendors folder naming PoCL's ICD
# and Oclgrind's (Debian's oclgrind ships liboclgrind-rt-icd.so, a simulated GPU
# with 128 MiB), passed to the ICD loader as OCL_ICD_VENDORS, so that cltrain
# sees two platforms without touching the system's /etc/OpenCL/vendors.
# Sourced by tests/test_vendors.sh and tests/bench/bench_vendors.sh:
#
#   . tests/vendors.sh
#   make_vendors DIR || exit 77      # creates DIR/pocl.icd and DIR/oclgrind.icd
#   export OCL_ICD_VENDORS=DIR
#
# By hand, the same in three lines (the library's folder as `dpkg -L oclgrind`
# lists it; /usr/lib/oclgrind on Debian 12):
#   mkdir vendors && cp /etc/OpenCL/vendors/pocl.icd vendors/
#   echo /usr/lib/oclgrind/liboclgrind-rt-icd.so > vendors/oclgrind.icd
#   OCL_ICD_VENDORS=$PWD/vendors cltrain devices

# oclgrind_icd: the path of Oclgrind's ICD library, or nothing.
oclgrind_icd() {
  local lib
  lib=$(dpkg -L oclgrind 2>/dev/null | grep -m1 '/liboclgrind-rt-icd\.so$')
  for f in $lib /usr/lib/oclgrind/liboclgrind-rt-icd.so /usr/lib/x86_64-linux-gnu/liboclgrind-rt-icd.so \
    /usr/local/lib/liboclgrind-rt-icd.so /usr/lib64/liboclgrind-rt-icd.so; do
    if [ -f "$f" ]; then
      echo "$f"
      return 0
    fi
  done
  return 1
}

# make_vendors DIR: writes DIR/pocl.icd (the system's) and DIR/oclgrind.icd;
# non-zero, saying what is missing on stderr, when either is not installed.
make_vendors() {
  local dir=$1 lib pocl=/etc/OpenCL/vendors/pocl.icd
  if [ ! -f "$pocl" ]; then
    echo "vendors: $pocl is missing (Debian package pocl-opencl-icd)" >&2
    return 1
  fi
  if ! lib=$(oclgrind_icd); then
    echo "vendors: Oclgrind's ICD library liboclgrind-rt-icd.so is missing (Debian package oclgrind)" >&2
    return 1
  fi
  mkdir -p "$dir" && cp "$pocl" "$dir/pocl.icd" && echo "$lib" >"$dir/oclgrind.icd"
}

# vendor_index NAME_REGEX: the index `cltrain devices` gives the device whose line
# matches (under OCL_ICD_VENDORS), or nothing. Needs $CLT.
vendor_index() {
  "$CLT" devices | grep -E -m1 -- "$1" | awk '{ print $1 }'
}
