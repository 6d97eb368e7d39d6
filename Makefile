# The two set-up commands of the README. Both are idempotent on a fresh machine.
.PHONY: setup demo test test-fast lint bench image image-analytics

setup:
	bash scripts/setup.sh

## Bring up a 3-node Kafka cluster and a gateway on loopback, round-trip records
## through the gateway, print what happened, and tear the stack down again.
demo: setup
	bash scripts/demo.sh

## Lint, type-check and run every test (unit + integration against real components).
test: setup
	.venv/bin/ruff check gateway tests bench examples
	.venv/bin/ruff format --check gateway tests bench examples
	.venv/bin/mypy gateway examples bench
	.venv/bin/python -m pytest -ra --durations=15

## What a developer runs on every change, in under two minutes: lint, type-check and the
## pure tier, the tests that start no redis, KDC, JVM or cluster (docs/testing.md).
## No set-up step: it uses what `make setup` (or `make test`) installed.
test-fast:
	@test -x .venv/bin/python || { echo "test-fast: no .venv yet; run make setup once"; exit 1; }
	.venv/bin/ruff check gateway tests bench examples
	.venv/bin/ruff format --check gateway tests bench examples
	.venv/bin/mypy gateway examples bench
	.venv/bin/python -m pytest -m pure -q

bench: setup
	.venv/bin/python -m bench.run

## The gateway's OCI image, built here without a registry (Debian 12 via debootstrap,
## buildah): localhost/kaas-gateway:<version> and :<version>-g<commit> in buildah's
## storage, build/image/*.oci.tar and its SBOM (deploy/README.md, decision 0036).
image: setup
	.venv/bin/python -m gateway.devstack.image --variant gateway

## The analytics image (Java 17 + PySpark, entrypoint kgw analyze), separate and larger.
image-analytics: setup
	.venv/bin/python -m gateway.devstack.image --variant analytics
