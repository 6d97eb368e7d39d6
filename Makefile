# The two set-up commands of the README. Both are idempotent on a fresh machine.
.PHONY: setup demo test lint bench

setup:
	bash scripts/setup.sh

## Bring up a 3-node Kafka cluster and a gateway on loopback, round-trip records
## through the gateway, print what happened, and tear the stack down again.
demo: setup
	bash scripts/demo.sh

## Lint, type-check and run every test (unit + integration against real components).
test: setup
	.venv/bin/ruff check gateway tests bench
	.venv/bin/ruff format --check gateway tests bench
	.venv/bin/mypy gateway
	.venv/bin/python -m pytest -ra --durations=15

bench: setup
	.venv/bin/python -m bench.run
