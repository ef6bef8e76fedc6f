#!/bin/sh
# Throw-away CA + server/client certificates for the TLS fallback probe.
# usage: certs.sh DIR
set -e
d=${1:?dir}; mkdir -p "$d"; cd "$d"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=spike-ca -keyout ca.key -out ca.pem 2>/dev/null
for who in server client; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj /CN=$who -keyout $who.key -out $who.csr 2>/dev/null
  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -days 2 -out $who.pem 2>/dev/null
done
# A certificate from another CA: must be refused too.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=rogue -keyout rogue.key -out rogue.pem 2>/dev/null
echo "certs in $d"
