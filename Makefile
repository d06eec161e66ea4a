# Two commands do all the set-up on a fresh machine:
#   make demo   set up, then run the main job (the simulation)
#   make test   set up, then run every test
PY := .venv/bin/python
# The simulated robot comes from mujoco-menagerie (downloaded on first use); the offline copy beside
# the checkout serves instead when it is there and MENAGERIE_ROOT is not set.
OFFLINE_TIDYBOT := $(abspath ../shared/models/tidybot)
ifeq ($(origin MENAGERIE_ROOT),undefined)
ifneq ($(wildcard $(OFFLINE_TIDYBOT)/stanford_tidybot/tidybot.xml),)
export MENAGERIE_ROOT := $(OFFLINE_TIDYBOT)
endif
endif
PYTEST_ARGS ?= -n 2

.PHONY: setup test demo lint bench check-launch harness-faults noise-sweep eval-short eval-long-horizon replay-roundtrip fuzz chaos soak appearance-accuracy memtransfer-bounds clean

setup:
	bash scripts/setup.sh

# The end-to-end simulations run last, on their own: each is a whole robot in real time, and on
# two cores the other tests' load starved its RPC servers (lost links, unreset controllers).
test: setup
	$(PY) -m pytest $(PYTEST_ARGS) --ignore=test/e2e
	$(PY) -m pytest test/e2e

demo: setup
	bash scripts/demo.sh

lint: setup
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/lint-imports

bench: setup
	bash scripts/bench.sh

# Runs the launch files for real with upstream launch/launch_ros built from source (not part of
# `make test`): LAUNCH_SOURCES is a folder with launch/, launch_ros/ and rcl_interfaces/ source
# trees; without it the script says it skips. See README "Launch check".
LAUNCH_SOURCES ?=
check-launch: setup
	bash scripts/check_launch.sh $(LAUNCH_SOURCES)

# The propose-verify harness under a faulty reasoner (about 30 minutes; not part of `make test`):
# mimir sim on both scenarios at fault rates 0, 0.2, 0.4, full harness and none; prints the table.
HARNESS_RUNS ?= runs/harness
harness-faults: setup
	MUJOCO_GL=egl $(PY) benchmarks/harness_faults.py --runs $(HARNESS_RUNS)

# Task progress over generated layouts and noise scales with the memory-free baselines (hours:
# 2 scenarios x 20 layouts x 4 scales of mimir sim; not part of `make test`). Smaller:
# make noise-sweep NOISE_ARGS="--layouts 2 --scales 0 1"
NOISE_RUNS ?= runs/noise
NOISE_ARGS ?=
noise-sweep: setup
	MUJOCO_GL=egl $(PY) benchmarks/noise_sweep.py --runs $(NOISE_RUNS) $(NOISE_ARGS)

# mimir eval over generated layouts, realistic profile, offline reasoner, trials in process with
# the first EVAL_NODES layouts of each method also run as the node graph (hours on two cores; not
# part of `make test`, which runs a two-trial smoke version). Each writes <folder>/report/;
# a stopped evaluation resumes where it stopped. Fewer: make eval-short EVAL_TRIALS=4
EVAL_RUNS ?= evals
EVAL_TRIALS ?= 50
EVAL_JOBS ?= 2
EVAL_NODES ?= 2
EVAL_ARGS ?=
eval-short: setup
	for scenario in locked_unlocked clutter_aware_pick; do \
		.venv/bin/mimir eval --scenario $$scenario --methods all --trials $(EVAL_TRIALS) \
			--nodes $(EVAL_NODES) --jobs $(EVAL_JOBS) --out $(EVAL_RUNS)/$$scenario \
			$(EVAL_ARGS) || exit 1; \
	done

# A Long Horizon trial as the node graph runs in real time (30-40 minutes), so this set runs
# in process only by default; the short scenarios carry the node comparison. EVAL_LH_NODES=1 adds
# one layout per method as the node graph.
EVAL_LH_TRIALS ?= 10
EVAL_LH_NODES ?= 0
eval-long-horizon: setup
	.venv/bin/mimir eval --scenario long_horizon --methods full,sg_ia,sg,sg_kf,roboexp,memer \
		--trials $(EVAL_LH_TRIALS) --nodes $(EVAL_LH_NODES) --jobs $(EVAL_JOBS) \
		--instruction-timeout 900 --out $(EVAL_RUNS)/long_horizon $(EVAL_ARGS)

# mimir record beside one mimir sim run, then mimir replay --fast; compares the memories (a few
# minutes; not part of `make test`).
ROUNDTRIP_RUNS ?= runs/roundtrip
replay-roundtrip: setup
	MUJOCO_GL=egl $(PY) benchmarks/replay_roundtrip.py --runs $(ROUNDTRIP_RUNS)

# Every node interface over DDS with generated messages, FUZZ_CASES per interface (about 15
# minutes at 600; not part of `make test`, which runs the same suite with a dozen cases each);
# writes $(FUZZ_RUNS)/rows.jsonl and the README's table, $(FUZZ_RUNS)/table.md.
FUZZ_RUNS ?= runs/fuzz
FUZZ_CASES ?= 600
fuzz: setup
	mkdir -p $(FUZZ_RUNS) && rm -f $(FUZZ_RUNS)/rows.jsonl
	MIMIR_FUZZ_CASES=$(FUZZ_CASES) MIMIR_FUZZ_TABLE=$(abspath $(FUZZ_RUNS))/rows.jsonl \
		$(PY) -m pytest test/fuzz -q -p no:cacheprovider --timeout=7200
	$(PY) benchmarks/fuzz_table.py $(FUZZ_RUNS)/rows.jsonl | tee $(FUZZ_RUNS)/table.md

# Each restartable node of the simulation graph killed (SIGKILL) during its own mimir sim run
# (about 3 minutes per node; not part of `make test`): restart, judgement, lost writes, memory
# check. Fewer: make chaos CHAOS_ARGS="--nodes scene_graph planner"
CHAOS_RUNS ?= runs/chaos
CHAOS_ARGS ?=
chaos: setup
	MUJOCO_GL=egl $(PY) benchmarks/chaos.py --runs $(CHAOS_RUNS) $(CHAOS_ARGS)

# An hour of one mimir sim run on a generated Locked-and-Unlocked layout, round after round, with
# RSS, descriptors and threads of every process, database and keyframe sizes and drop counters
# sampled every minute (not part of `make test`); writes $(SOAK_RUNS)/summary.md and soak.png.
# Shorter: make soak SOAK_ARGS="--minutes 20 --warmup 5"
SOAK_RUNS ?= runs/soak
SOAK_ARGS ?=
soak: setup
	MUJOCO_GL=egl $(PY) benchmarks/soak.py --runs $(SOAK_RUNS) $(SOAK_ARGS)

# Colour words, patterns and same-instance matching without a model, on rendered look-alike
# objects across noise scales and on the 7-Scenes kitchen (about a minute; not part of
# `make test`); prints the README's tables.
appearance-accuracy: setup
	MUJOCO_GL=egl $(PY) benchmarks/appearance_accuracy.py \
		--sevenscenes $(abspath ../shared/data/sevenscenes_kitchen)

# The MemTransfer harness's bounds: the oracle and the memory-free explorer on all four
# conditions, three runs (a few minutes on two cores); report in bench/memtransfer/report.md.
memtransfer-bounds: setup
	$(PY) -m mimir.cli bench memtransfer --runs 3 --jobs 2 --start-table --out bench/memtransfer

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache .hypothesis .grimp_cache
