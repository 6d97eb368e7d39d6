#!/usr/bin/env bash
# One-time (idempotent) set-up of a fresh machine: Debian packages, the
# project's virtualenv, and the pinned Apache Kafka jars from Maven Central.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v krb5kdc >/dev/null || need_apt+=(krb5-kdc krb5-admin-server)
command -v kinit >/dev/null || need_apt+=(krb5-user)
[ -e /usr/include/gssapi/gssapi.h ] || need_apt+=(libkrb5-dev)
command -v haproxy >/dev/null || need_apt+=(haproxy)
command -v promtool >/dev/null || need_apt+=(prometheus)  # monitoring: alert-rule tests, e2e scrape
[ -e /usr/lib/softhsm/libsofthsm2.so ] || need_apt+=(softhsm2)  # PKCS#11 key manager tests
command -v chromium >/dev/null || need_apt+=(chromium)  # renders the anomaly report in a test
command -v prometheus-alertmanager >/dev/null || need_apt+=(prometheus-alertmanager)  # kgw analyze --follow alerts test
command -v buildah >/dev/null || need_apt+=(buildah)  # make image (container images, the image test tier)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)  # make image: the Debian 12 root filesystem
command -v skopeo >/dev/null || need_apt+=(skopeo)  # deploy/README.md: pushing the image
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e '.[dev]'

.venv/bin/python -m gateway.devstack.kafka_dist
.venv/bin/python -m gateway.analytics.kafka_source  # Spark's Kafka source for kgw analyze --follow
